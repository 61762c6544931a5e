"""Views of the Analysis tab: the head-statistics table model, a clickable layer x head map and the panel that
shows one sentence's attention as raw, norm-weighted or rolled-out maps; ``run_partner`` picks where the compare
dialog starts.

They are views: data arrives through one setter each and nothing here runs the model.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QObject, Qt, Signal, Slot
from PySide6.QtGui import QMouseEvent, QPainter
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QTableView, QVBoxLayout, QWidget

from attnviz.engine.analysis.names import PROXY, SIDE_BY_SIDE, SIGNED_VIEWS, THRESHOLDS, VIEWS
from attnviz.engine.events import ATTENTION_KINDS
from attnviz.engine.training.runs import RunPaths, run_checkpoint
from attnviz.gui.analysis import baselines
from attnviz.gui.analysis.llm_notes import draw_groups, group_of
from attnviz.gui.attention.heatmap import HeatmapData, HeatmapView
from attnviz.gui.widgets import NO_PARENT, ModelIndex, add_labelled, guarded_paint, named

if TYPE_CHECKING:
    from attnviz.engine.analysis.alignment import AlignmentReady
    from attnviz.engine.analysis.stats import HeadStats

SHARES = {"max_weight", "sos", "eos", "punct", "sink", "same", "prev", "next", "norm_entropy", "alignment_proxy"}
AER = "aer"  # the statistic the map shows once gold alignments gave every head an error rate


def run_partner(path: str | None) -> str:
    """Where the compare dialog starts: the other file of the same training run (its last checkpoint beside the
    best, the best beside any other), else the model's folder."""
    if not path:
        return ""
    current = Path(path)
    best = run_checkpoint(current)
    for candidate in ((RunPaths(best).last,) if current == best else (best, RunPaths(best).last)):
        if candidate != current and candidate.exists():
            return str(candidate)
    return str(current.parent)


HEAD_NUMBERS = ("layer", "head", "kv_head")  # shown from 1


class StatsTableModel(QAbstractTableModel):
    """One row per head (``HeadStats.table()`` rows); layers and heads shown from 1 as in the Translate tab."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._rows: list[dict] = []
        self._columns: list[str] = []

    def set_rows(self, rows: list[dict]) -> None:
        self.beginResetModel()
        self._rows = rows
        self._columns = list(rows[0]) if rows else []
        self.endResetModel()

    def size_columns(self, table: QTableView) -> None:
        """Column widths from the titles and a sample value: measuring every cell stalls on a large model."""
        metrics = table.fontMetrics()
        for column in range(self.columnCount()):
            title = self.headerData(column, Qt.Orientation.Horizontal)
            sample = {"tags": "positional, diffuse", "kind": "encoder", "layer": "12", "head": "12",
                      "kv head": "12"}.get(title, "0.000")
            width = max(metrics.horizontalAdvance(title), metrics.horizontalAdvance(sample))
            table.setColumnWidth(column, width + 18)

    def row(self, index: int) -> dict:
        return self._rows[index]

    def rowCount(self, parent: ModelIndex = NO_PARENT) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: ModelIndex = NO_PARENT) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._columns)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self._columns[section].replace("_", " ")
        return None

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        name = self._columns[index.column()]
        value = self._rows[index.row()][name]
        if role == Qt.ItemDataRole.UserRole:  # sort key: numbers as numbers, missing values last
            if name in HEAD_NUMBERS or isinstance(value, float):
                return float(value)
            return -1e9 if value is None else str(value)
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if name in HEAD_NUMBERS:
            return str(value + 1)
        if name == "tags":
            return ", ".join(value)
        return "–" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))


def thresholds_text() -> str:
    """The tags' rules and the alignment proxy, as the Heads page states them."""
    tags = "; ".join(f"<b>{tag}</b>: {escape(rule)}" for tag, rule in THRESHOLDS.items())
    return f"Tags: {tags}. Figures are means over query rows; {escape(PROXY)}."


class HeadMap(HeatmapView):
    """A layer x head map of one statistic; clicking a cell emits ``clicked(layer, head)``."""

    clicked = Signal(int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("headMap")
        self.setAccessibleName("Statistic per layer and head")
        self.placeholder = "Run the analysis to see a statistic per layer and head"
        self.marks: baselines.Baselines | None = None  # on the AER map: the best head and the diagonal baseline
        self.kv_group = 0  # query heads per key/value head: grouped-query attention's groups are parted by lines
        self.note = named(QLabel(), "headMapNote", "What the map marks")  # the tab lays it out under the map
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note.hide()

    def show_matrix(self, matrix: np.ndarray, title: str, fixed_scale: bool, signed: bool = False) -> None:
        """``matrix`` [L, H]; a fixed 0..1 colour scale for shares, per-map for entropies and distances, a
        diverging one centred on zero for ``signed`` figures."""
        layers, heads = matrix.shape
        self.set_data(HeatmapData(np.nan_to_num(matrix), tuple(f"L{i + 1}" for i in range(layers)),
                                  tuple(f"H{h + 1}" for h in range(heads)), "layer", "head", title,
                                  per_map=not fixed_scale, signed=signed))

    def show_statistic(self, stats: HeadStats, stat: str, kind: str, alignment: AlignmentReady | None,
                       compared: HeadStats | None) -> None:
        """``stat`` (or the AER) of ``kind`` per head; with ``compared``, its difference B - A or, for a kind the
        compared model lacks, nothing with a reason: never A's own values under the B - A box."""
        self.marks = None
        self.note.hide()
        if stat == AER:
            if kind != "cross" or alignment is None or alignment.aer_heads is None:
                self.set_data(None)
                self.placeholder = "AER is measured on cross-attention"
                return
            self.marks = baselines.Baselines.of(alignment)
            if self.marks is not None:
                self.note.setText(self.marks.note(alignment.aer_heads))
                self.note.show()
            self.show_matrix(alignment.aer_heads, "AER per head (lower aligns better)", True)
        elif compared is not None:
            if kind in compared.kinds and compared.layout(kind) == stats.layout(kind):
                self.show_matrix(compared.means(kind)[stat] - stats.means(kind)[stat],
                                 f"{kind}: {stat.replace('_', ' ')}, compared checkpoint minus loaded", False)
                return
            self.set_data(None)
            self.placeholder = (f"The compared checkpoint has no {kind} attention of the same layers x heads: "
                                "choose another kind, or clear Show B - A")
        else:
            self.show_matrix(stats.means(kind)[stat], f"{kind}: {stat.replace('_', ' ')}", stat in SHARES)

    @guarded_paint
    def paintEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        super().paintEvent(event)
        data, g = self.data(), self._geometry
        if data is None or g is None or (self.marks is None and not self.kv_group):
            return
        painter = QPainter(self)
        draw_groups(painter, self._cells, g, data.matrix.shape[1], self.kv_group)
        if self.marks is not None:
            baselines.draw(painter, self._cells, g, data.matrix, self.marks, *self.colour_range())
        painter.end()

    def describe_cell(self, row: int, col: int) -> str:
        return super().describe_cell(row, col) + group_of(col, self.kv_group)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        cell = self.cell_at(event.position().toPoint())
        if cell is not None:
            self.clicked.emit(*cell)


class SentenceViews(QWidget):
    """One sentence's attention under a chosen view (raw, norm-weighted, rollout) for a kind, layer and head."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.views: dict[str, dict[str, np.ndarray]] = {}
        self.labels: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self.view_combo = named(QComboBox(), "viewCombo", "Attention view",
                                "Raw weights, norm-weighted (Kobayashi et al. 2020) or rollout (Abnar & Zuidema 2020)")
        self.kind_combo = named(QComboBox(), "viewKindCombo", "Attention kind")
        self.layer_spin = named(QSpinBox(), "viewLayerSpin", "Layer")
        self.head_spin = named(QSpinBox(), "viewHeadSpin", "Head")
        for combo in (self.view_combo, self.kind_combo):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.quantity = named(QLabel(), "viewQuantity", "Quantity shown")
        self.quantity.setWordWrap(True)
        self.heatmap = HeatmapView()
        self.heatmap.placeholder = "Translate a sentence, then open this tab to see it under each view"
        self.side_heatmap = HeatmapView()  # the compared checkpoint, in the side-by-side view
        self.side_heatmap.setObjectName("sideHeatmap")
        self.side_heatmap.hide()
        row = QHBoxLayout()
        add_labelled(row, (("&View:", self.view_combo), ("&Kind:", self.kind_combo), ("L&ayer:", self.layer_spin),
                           ("H&ead:", self.head_spin)))
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.quantity)
        maps = QHBoxLayout()
        maps.addWidget(self.heatmap, 1)
        maps.addWidget(self.side_heatmap, 1)
        layout.addLayout(maps, 1)
        for combo in (self.view_combo, self.kind_combo):
            combo.currentIndexChanged.connect(self._on_choice_changed)
        for spin in (self.layer_spin, self.head_spin):
            spin.valueChanged.connect(self._on_choice_changed)

    def set_views(self, views: dict[str, dict[str, np.ndarray]],
                  labels: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]) -> None:
        """``views``: view -> kind -> [L, H, Tq, Tk]; ``labels``: kind -> (row labels, column labels)."""
        self.views, self.labels = views, labels
        names = list(views) + (["side-by-side"] if all(v in views for v in SIDE_BY_SIDE) else [])
        for combo, items in ((self.view_combo, names), (self.kind_combo, list(views.get("raw", {})))):
            current = combo.currentData()
            combo.blockSignals(True)
            combo.clear()
            for item in items:
                combo.addItem(VIEWS.get(item, ATTENTION_KINDS[item].label if item in ATTENTION_KINDS else item), item)
            combo.setCurrentIndex(max(0, combo.findData(current)))
            combo.blockSignals(False)
        self._on_choice_changed()

    @Slot()
    def _on_choice_changed(self) -> None:
        view, kind = self.view_combo.currentData(), self.kind_combo.currentData()
        side = view == "side-by-side"
        self.side_heatmap.setVisible(side)
        maps = self.views.get(SIDE_BY_SIDE[0] if side else view, {}).get(kind)
        if maps is None:
            self.heatmap.set_data(None)
            self.quantity.setText("" if view is None else f"{VIEWS[view]}: not available for this attention kind")
            return
        self.layer_spin.setRange(1, maps.shape[0])
        self.head_spin.setRange(1, maps.shape[1])
        self.head_spin.setEnabled(not view.startswith("rollout"))
        where = f"layer {self.layer_spin.value()}" + ("" if view.startswith("rollout") else
                                                      f", head {self.head_spin.value()}")
        signed = view in SIGNED_VIEWS
        self.quantity.setText(f"Shown: {VIEWS[view]} ({ATTENTION_KINDS[kind].label}, {where})" +
                              ("." if signed else "; every row sums to 1."))
        self.heatmap.set_data(self._map(maps, kind, "loaded model" if side else VIEWS[view], signed))
        if side:
            self.side_heatmap.set_data(self._map(self.views[SIDE_BY_SIDE[1]][kind], kind, "compared checkpoint",
                                                 False))

    def _map(self, maps: np.ndarray, kind: str, what: str, signed: bool) -> HeatmapData:
        """The chosen layer and head of ``maps`` [L, H, Tq, Tk] as a heatmap."""
        rows, cols = self.labels[kind]
        info = ATTENTION_KINDS[kind]
        matrix = maps[self.layer_spin.value() - 1, self.head_spin.value() - 1]
        return HeatmapData(matrix, rows[: matrix.shape[0]], cols[: matrix.shape[1]], info.query_axis, info.key_axis,
                           f"{info.label}: {what}", per_map=signed, signed=signed)
