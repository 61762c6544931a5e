"""The Analysis tab's suspect-translations page: the corpus chosen above ranked by the suspect-translation score
(``engine.attribution.suspect``), flagged and most suspect first, the verdict and every component a column beside the
combined score (calibrated on the model's held-out data where it was, else log-prob per token alone, said), computed
in the background (progress, Cancel), copyable (Ctrl+C, Copy all) and exported as CSV or JSON. Double-clicking a
row opens its source sentence in the Translate tab. The engine does the work; this page asks and shows.
"""

from __future__ import annotations

import csv
import json
import math
from html import escape
from pathlib import Path
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QSortFilterProxyModel, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from attnviz.engine.attribution.base import AttributionProgress
from attnviz.engine.attribution.suspect.components import COMPONENTS, LABELS, SPAN_NOTE
from attnviz.engine.attribution.suspect.rank import SuspectRanking
from attnviz.engine.attribution.suspect.rule import describe
from attnviz.gui.data_folder import missing_data_hint
from attnviz.gui.widgets import NO_PARENT, ModelIndex, add_labelled, copyable, named
from attnviz.gui.worker import JobFailure, Worker

COLUMNS = ("rank", "line", "combined", "verdict", *COMPONENTS, "source", "output", "reference")
TITLES = {"rank": "#", "line": "line", "combined": "combined", "verdict": "verdict", **LABELS, "source": "source",
          "output": "output", "reference": "reference"}
TEXT_COLUMNS = ("verdict", "source", "output", "reference")
FILTERS = "CSV table (*.csv);;JSON (*.json)"


SOURCES = ("Attn-ign-SRC: the share of source words (not <sos>, <eos> or language tags) whose total cross-attention "
           "is under 0.2. Sink mass: cross-attention on <sos>, <eos>, punctuation and language tags. Wass-to-Unif: "
           "total variation (Wasserstein, 0/1 cost) of the source attention mass from uniform. ALTI+ source: the "
           "share of each output token that comes from the source, averaged. " + SPAN_NOTE + ".")


def cell_text(value: Any) -> str:
    """A figure to 6 significant digits (the exports keep every digit); "–" where a component is not defined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


class SuspectTableModel(QAbstractTableModel):
    """One row per sentence of a ``SuspectRanking`` (its ``records``), most suspect first."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.records: list[dict] = []

    def set_ranking(self, ranking: SuspectRanking | None) -> None:
        self.beginResetModel()
        self.records = ranking.records() if ranking is not None else []
        self.endResetModel()

    def rowCount(self, parent: ModelIndex = NO_PARENT) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.records)

    def columnCount(self, parent: ModelIndex = NO_PARENT) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return TITLES[COLUMNS[section]]
        return None

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        value = self.records[index.row()][COLUMNS[index.column()]]
        if role == Qt.ItemDataRole.UserRole:  # sort key: numbers as numbers, undefined ones first
            if isinstance(value, (int, float)):
                return -math.inf if isinstance(value, float) and math.isnan(value) else float(value)
            return value or ""
        if role == Qt.ItemDataRole.ToolTipRole:
            return repr(value) if isinstance(value, float) else value
        return cell_text(value) if role == Qt.ItemDataRole.DisplayRole else None


class SuspectPanel(QWidget):
    status = Signal(str)
    open_sentence = Signal(str)  # a source sentence to translate in the Translate tab

    def __init__(self, corpus, data_dir, parent: QWidget | None = None):
        """``corpus()`` returns the Analysis tab's choice (split, source file, reference file); ``data_dir()`` the
        app's data folder."""
        super().__init__(parent)
        self.corpus, self.data_dir = corpus, data_dir
        self.translator = None
        self.ranking: SuspectRanking | None = None
        self.worker = Worker(self)
        self.limit_spin = named(QSpinBox(), "suspectLimitSpin", "Sentences to rank",
                                "Rank the first N sentences of the corpus chosen above (0 = all)")
        self.limit_spin.setRange(0, 1_000_000)
        self.limit_spin.setSpecialValueText("all")
        self.limit_spin.setValue(200)
        self.rank_button = named(QPushButton("Ran&k"), "rankSuspectButton", "Rank suspect translations",
                                 "Translate the corpus chosen above and rank its sentences by the suspect score")
        self.cancel_button = named(QPushButton("Canc&el"), "cancelSuspectButton", "Cancel the ranking")
        self.export_button = named(QPushButton("E&xport..."), "exportSuspectButton", "Export the ranking",
                                   "Save the table as CSV or JSON (every digit)")
        self.progress = named(QProgressBar(), "suspectProgress", "Ranking progress")
        self.progress.setFormat("%v / %m")
        self.detail = named(QLabel(), "suspectDetail", "The selected sentence: source, output and reference")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary = named(QLabel(), "suspectSummary", "How the suspect score is made")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.model = SuspectTableModel(self)
        self.proxy = QSortFilterProxyModel(self)  # sorts the view; the model keeps the ranking's order
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.table = copyable(named(QTableView(), "suspectTable", "Suspect translations, most suspect first",
                                    "Every component of the score per sentence; click a title to sort, double-click "
                                    "a row to translate its source"))
        self._build()
        self.set_translator(None)

    def _build(self) -> None:
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # the ranking's own order until a title is clicked
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableView.SelectionMode.ExtendedSelection)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 6)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.setWordWrap(False)
        row = QHBoxLayout()
        add_labelled(row, (("Sentence&s:", self.limit_spin),))
        for button in (self.rank_button, self.cancel_button):
            row.addWidget(button)
        row.addWidget(self.progress, 1)
        row.addWidget(self.export_button)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.summary)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.detail)
        self.summary.setText(self._explain())
        self.rank_button.clicked.connect(self.compute)
        self.cancel_button.clicked.connect(self.cancel)
        self.export_button.clicked.connect(self._on_export_clicked)
        self.table.doubleClicked.connect(self._on_table_double_clicked)
        self.table.selectionModel().currentRowChanged.connect(self._on_table_row_changed)
        self.worker.produced.connect(self._on_produced)
        self.worker.failed.connect(self._on_failed)
        self.worker.finished.connect(self._on_finished)

    def _explain(self, ranking: SuspectRanking | None = None) -> str:
        """The summary above the table; its tooltip gives what each component reached on the model."""
        calibration = ranking.calibration if ranking is not None else None
        where = ranking.where if ranking is not None else "rank to read the model's calibration"
        self.summary.setToolTip(f"{SOURCES}\n" + "\n".join(describe(calibration, where)))
        if ranking is None:
            return ("Ranks the corpus chosen above by signs of hallucination (greedy translations; the last "
                    "cross-attention layer, heads averaged). Hover here for the details.")
        notes = "".join(f" {escape(n)}." for n in ranking.notes)
        return (f"<b>{len(ranking.rows)} sentences of the {escape(ranking.corpus)}</b>: {escape(ranking.how)}. "
                f"Hover here for each component's AUROC.{notes}")

    def set_translator(self, translator) -> None:
        self.worker.cancel()
        self.translator = translator
        self._set_running(False)

    def is_running(self) -> bool:
        return self.worker.is_running()

    def _set_running(self, running: bool) -> None:
        can = self.translator is not None and self.translator.has_source
        self.rank_button.setEnabled(can and not running)
        self.rank_button.setToolTip("Translate the corpus chosen above and rank its sentences by the suspect score"
                                    if can or self.translator is None else
                                    "A language model has no source: the suspect-translation score needs one")
        self.cancel_button.setEnabled(running)
        self.limit_spin.setEnabled(not running)
        self.export_button.setEnabled(self.ranking is not None and not running)

    def compute(self) -> None:
        if self.translator is None or not self.translator.has_source:
            return
        split, src, tgt = self.corpus()
        if split in (None, "pairs") and not src:
            self.status.emit("Choose a source file first (Corpus: Text files...)")
            return
        from attnviz.engine.attribution.suspect.corpus import suspect_job

        translator, corpus, limit, data = self.translator, (split, src, tgt), self.limit_spin.value(), self.data_dir()
        self.set_ranking(None)
        self.progress.setRange(0, 0)  # busy until the corpus is read
        self._set_running(True)
        self.status.emit("Ranking suspect translations...")
        self.worker.start(lambda stop: suspect_job(translator, corpus, limit, stop, data))

    @Slot()
    def cancel(self) -> None:
        if not self.is_running():
            return
        self.worker.cancel()
        self.progress.setRange(0, 1)
        self.progress.reset()
        self.summary.setText("Cancelled: nothing was kept. Press Rank to start again.")
        self._set_running(False)
        self.status.emit("Suspect ranking cancelled")

    @Slot(object)
    def _on_produced(self, event) -> None:
        if isinstance(event, AttributionProgress):
            self.progress.setRange(0, event.total)
            self.progress.setValue(event.done)
            self.progress.setFormat(f"{event.phase}: %v / %m")  # the unit (sentences) would wrap at 1024 px
        elif isinstance(event, SuspectRanking):
            self.set_ranking(event)
            self.status.emit(f"Suspect translations ranked: {len(event.rows)} sentences")

    @Slot(object)
    def _on_failed(self, failure: JobFailure) -> None:
        first_line = failure.text.splitlines()[0] + missing_data_hint(failure)
        self.progress.setRange(0, 1)
        self.progress.reset()
        self.summary.setText(f"<b>The ranking failed:</b> {escape(first_line)}")
        self.status.emit(first_line)

    @Slot()
    def _on_finished(self) -> None:
        self._set_running(False)

    def set_ranking(self, ranking: SuspectRanking | None) -> None:
        self.ranking = ranking
        self.model.set_ranking(ranking)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)
        self.summary.setText(self._explain(ranking))
        metrics = self.table.fontMetrics()
        for column, name in enumerate(COLUMNS):
            sample = "x" * 28 if name in TEXT_COLUMNS else "99999" if name in ("rank", "line") else "-0.000000"
            width = max(metrics.horizontalAdvance(TITLES[name]), metrics.horizontalAdvance(sample))
            self.table.setColumnWidth(column, width + 16)
        self._set_running(self.is_running())
        if self.model.records:
            self.table.selectRow(0)
        else:
            self.detail.setText("")

    def save_file(self, path: str) -> None:
        """The ranking as CSV (one row per sentence) or JSON (with how it was combined), every digit kept."""
        if self.ranking is None:
            return
        records = self.ranking.records()
        try:
            if Path(path).suffix.lower() == ".json":
                model = self.translator.metadata.get("path") if self.translator is not None else None
                calibration = self.ranking.calibration
                data = {"model": model, "corpus": self.ranking.corpus, "how": self.ranking.how,
                        "notes": list(self.ranking.notes), "calibration": calibration and calibration.to_dict(),
                        "rows": records}
                text = json.dumps(_without_nan(data), indent=1, ensure_ascii=False)
                Path(path).write_text(text + "\n", encoding="utf-8")
            else:
                with open(path, "w", newline="", encoding="utf-8") as f:
                    writer = csv.DictWriter(f, fieldnames=list(COLUMNS))
                    writer.writeheader()
                    writer.writerows(records)
        except OSError as exc:
            self.status.emit(f"Cannot save {path}: {exc.strerror or exc}")
            return
        self.status.emit(f"Suspect ranking saved to {path}")

    @Slot()
    def _on_export_clicked(self) -> None:
        path, chosen = QFileDialog.getSaveFileName(self, "Export the suspect ranking", "suspect-ranking.csv", FILTERS)
        if path:
            if not Path(path).suffix:
                path += ".json" if "json" in chosen.lower() else ".csv"
            self.save_file(path)

    @Slot(QModelIndex, QModelIndex)
    def _on_table_row_changed(self, current: QModelIndex, previous: QModelIndex) -> None:
        row = self.proxy.mapToSource(current).row() if current.isValid() else -1
        if not 0 <= row < len(self.model.records):
            self.detail.setText("")
            return
        record = self.model.records[row]
        reference = f"<br><b>Reference:</b> {escape(record['reference'])}" if record["reference"] else ""
        self.detail.setText(f"<b>#{record['rank']}, line {record['line']}</b> (combined "
                            f"{cell_text(record['combined'])})<br><b>Source:</b> {escape(record['source'])}"
                            f"<br><b>Output:</b> {escape(record['output'])}{reference}")

    @Slot(QModelIndex)
    def _on_table_double_clicked(self, index: QModelIndex) -> None:
        row = self.proxy.mapToSource(index).row()
        if 0 <= row < len(self.model.records):
            self.open_sentence.emit(self.model.records[row]["source"])


def _without_nan(data):
    """JSON has no NaN: an undefined component is written as null."""
    if isinstance(data, dict):
        return {k: _without_nan(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_without_nan(v) for v in data]
    return None if isinstance(data, float) and math.isnan(data) else data
