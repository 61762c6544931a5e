"""AttentionPanel: kind / layer / head selectors over the large heatmap and the grid of every layer x head.

It follows a decode document (``follow(document, source)``): at each step shown, new path, encoder pass or clearing
it shows ``source()`` (the Translate tab's chosen quantity over that document: attention, a contribution view or an
attribution) as of the document's step; the quantity's owner calls ``refresh`` when the source itself changes, and
the panel redraws when a selector changes;
``beside`` shows a second map (attention beside an attribution) left of the main one when given data. The large map
takes the room; the grid and the caption share a narrow column beside it (a splitter the tab remembers). Only the
kinds the model has are offered, so an RNN (cross only) or a language model (decoder only) needs no special case.
Merging subword pieces into words is this panel's choice: it asks the source for merged maps while its box is ticked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from attnviz.gui.attention.head_grid import HeadGrid
from attnviz.gui.attention.heatmap import HeatmapData, HeatmapView
from attnviz.gui.attention.selector_rows import SelectorRows
from attnviz.gui.attention.zoom import zoom_buttons
from attnviz.gui.widgets import add_labelled, scrolled
from attnviz.session.attention.source import AttentionSource, peaked_layer
from attnviz.session.attention.wording import Marks, caption_text, head_choices
from attnviz.session.translate.changes import Cleared, DocumentChange, Encoded, PathShown, StepShown
from attnviz.session.translate.document import DecodeDocument


def _combo(name: str, tip: str, least: int = 80) -> QComboBox:
    combo = QComboBox()
    combo.setObjectName(name)
    combo.setAccessibleName(tip)
    combo.setToolTip(tip)
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
    combo.setMinimumWidth(least)  # as wide as its items when there is room; narrower (elided) beside the side column
    return combo


def set_choices(combo: QComboBox, items: list[str], index: int, enabled: bool) -> None:
    """Give ``combo`` these ``items`` (refilled only if they changed) and select ``index``, emitting no signal."""
    combo.blockSignals(True)
    if [combo.itemText(i) for i in range(combo.count())] != items:
        combo.clear()
        combo.addItems(items)
    combo.setCurrentIndex(min(max(index, 0), len(items) - 1))
    combo.setEnabled(enabled)
    combo.blockSignals(False)


class AttentionPanel(QWidget):
    selection_changed = Signal()  # layer/head/kind changed: token shading follows
    head_toggled = Signal(str, int, int)  # kind, layer, head (-1: the whole layer) to switch off or on again

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._source: AttentionSource | None = None
        self._step = -1
        self._document: DecodeDocument | None = None  # followed (``follow``)
        self._source_of: Callable[[], AttentionSource | None] = lambda: None
        self._chosen_kind: str | None = None  # the kind the user picked; kept across translations
        self.chosen_layer: int | None = None  # likewise the layer and head (None: not chosen, the last layer)
        self._peak_pending = False  # an LLM's peaked layer waits for the first output row (``display``)
        self.chosen_head = 0  # index in the head selector: 0 is the mean of heads
        self.kind_combo = _combo("attentionKindCombo", "Attention kind", 96)
        self.layer_combo = _combo("layerCombo", "Layer")
        self.head_combo = _combo("headCombo", "Head, or the mean of all heads")
        self.scale_combo = _combo("scaleCombo", "Colour scale")
        self.scale_combo.addItems(["Fixed scale 0..1", "Per-map scale"])
        self.merge_check = QCheckBox("Merge sub&words")
        self.merge_check.setObjectName("mergeSubwordsCheck")
        self.merge_check.setToolTip("Show words instead of subword pieces: a word's weight is the sum over its key "
                                    "pieces, averaged over its query pieces, so every row still sums to 1")
        self.merge_check.setEnabled(False)
        self.alignment_head: tuple[int, int] | None = None  # (layer, head) of cross-attention trained to align
        self.heads_off: tuple = ()  # HeadRefs switched off (engine.heads), crossed out in the grid
        self.heatmap = HeatmapView()
        self.beside = HeatmapView()  # attention beside the quantity chosen, when asked
        self.beside.setObjectName("besideHeatmap")
        self.beside.setAccessibleName("Attention beside the quantity")
        self.beside.hide()
        self.grid = HeadGrid()
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.caption.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.caption.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._lay_out()

        self.kind_combo.currentIndexChanged.connect(self._on_kind_changed)
        self.layer_combo.currentIndexChanged.connect(self._on_selector_changed)
        self.head_combo.currentIndexChanged.connect(self._on_selector_changed)
        self.scale_combo.currentIndexChanged.connect(self._on_selector_changed)
        self.grid.selected.connect(self._on_grid_selected)
        self.grid.toggled.connect(self._on_grid_toggled)
        self.grid.layer_toggled.connect(self._on_grid_layer_toggled)
        self.merge_check.toggled.connect(self._on_merge_toggled)

    def _lay_out(self) -> None:
        """The selectors over the map, and beside the map a narrow column: the grid, then the caption."""
        self.controls = controls = QHBoxLayout()
        add_labelled(controls, (("&Kind", self.kind_combo), ("&Layer", self.layer_combo), ("H&ead", self.head_combo)))
        self.display_box = QWidget()  # the scale and merge choices: beside the selectors, under them when narrow
        self.display_row = display = QHBoxLayout(self.display_box)
        display.setContentsMargins(0, 0, 0, 0)
        display.addWidget(self.scale_combo)
        display.addWidget(self.merge_check)
        controls.addStretch(1)
        self.lead_box = QWidget()  # selectors added before the kind (``add_controls``)
        self.lead_row = QHBoxLayout(self.lead_box)
        self.lead_row.setContentsMargins(0, 0, 0, 0)
        self.rows = SelectorRows(controls, self.lead_box, self.display_box, self.head_combo, self)
        for button in zoom_buttons(self, self.zoom_in, self.zoom_out, self.zoom_fit):
            controls.addWidget(button)
        self.heatmap_scroll = QScrollArea()
        self.heatmap_scroll.setObjectName("heatmapScroll")
        self.heatmap_scroll.setWidgetResizable(True)
        self.heatmap_scroll.setWidget(self.heatmap)
        self.heatmap_scroll.setMinimumSize(240, 160)
        side = QWidget()  # the grid at the height its tiles need, the caption under it (scrolled when long)
        column = QVBoxLayout(side)
        column.setContentsMargins(0, 0, 0, 0)
        self.side_column = column
        column.addWidget(self.grid)
        column.addWidget(scrolled(self.caption, "captionScroll"), 1)
        self.maps_splitter = QSplitter(Qt.Orientation.Horizontal)  # the map, and the one beside it when shown
        self.maps_splitter.addWidget(self.beside)
        self.maps_splitter.addWidget(self.heatmap_scroll)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("attentionSplitter")
        self.splitter.addWidget(self.maps_splitter)
        self.splitter.addWidget(side)
        self.splitter.setStretchFactor(0, 1)  # a wider window widens the map, not the grid
        self.splitter.setStretchFactor(1, 0)
        self.splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(controls)
        layout.addLayout(self.rows.second)
        layout.addLayout(self.rows.third)
        layout.addWidget(self.splitter, 1)

    def add_controls(self, first: list[QWidget], display: list[QWidget], side: list[QWidget],
                     tools: list[QWidget]) -> None:
        """More selectors: ``first`` before the kind, ``display`` with the scale and merge choices (each group under
        the selectors when they do not fit beside them), ``side`` at the top of the grid's column, ``tools`` before
        the zoom buttons."""
        for widget in tools:
            self.controls.insertWidget(self.controls.count() - 3, widget)
        for widget in first:
            self.lead_row.addWidget(widget)
        for widget in display:
            self.display_row.addWidget(widget)
        for i, widget in enumerate(side):
            self.side_column.insertWidget(i, widget)

    def show_beside(self, data: HeatmapData | None) -> None:
        """The map beside the main one (None: hidden)."""
        self.beside.set_data(data)
        self.beside.setVisible(data is not None)

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self.wrap_selectors()

    def wrap_selectors(self) -> None:
        self.rows.wrap(self.width())

    @Slot()
    def zoom_in(self) -> None:
        self.heatmap.zoom_by(1.25)

    @Slot()
    def zoom_out(self) -> None:
        self.heatmap.zoom_by(0.8)

    @Slot()
    def zoom_fit(self) -> None:
        self.heatmap.set_zoom(None)

    # -- state -------------------------------------------------------------------------------------------------------

    @property
    def kind(self) -> str | None:
        return self.kind_combo.currentData()

    @property
    def layer(self) -> int:
        return max(self.layer_combo.currentIndex(), 0)

    @property
    def head(self) -> int | None:
        """Selected head, or None for the mean of heads."""
        index = self.head_combo.currentIndex()
        return None if index <= 0 else index - 1

    @property
    def per_map(self) -> bool:
        return self.scale_combo.currentIndex() == 1

    @property
    def merged(self) -> bool:
        """Whether the maps shown are merged into words."""
        return self.merge_check.isEnabled() and self.merge_check.isChecked()

    def follow(self, document: DecodeDocument, source: Callable[[], AttentionSource | None]) -> None:
        """Show ``source()`` as of ``document``'s step from now on, told by the document itself."""
        self._document, self._source_of = document, source
        document.subscribe(self._on_document_changed)

    def _on_document_changed(self, change: DocumentChange) -> None:
        match change:
            case Cleared():
                self.display(self._source_of(), -1)
            case Encoded() | PathShown() | StepShown():
                self.refresh()

    def refresh(self) -> None:
        """Show the followed source again as of the document's step (the source changed: another quantity, its
        result, its options)."""
        if self._document is not None:
            encoded = self._document.encoder is not None
            self.display(self._source_of(), self._document.current if encoded else -1)

    def display(self, source: AttentionSource | None, step: int) -> None:
        """Display ``source`` as of ``step`` (-1: the encoder pass only)."""
        self._source, self._step = source, step
        self.merge_check.setEnabled(source is not None and source.mergeable)
        self._sync_kinds()
        self._settle_peaked_layer()  # the rows it waited for may have come with this step
        self.redraw()
        self.wrap_selectors()  # the selectors' items may have changed their widths

    def _settle_peaked_layer(self) -> None:
        """Open on the most peaked layer once the first output row is there (no choice of the user's is replaced)."""
        kind = self.kind
        if not self._peak_pending or self.chosen_layer is not None or self._source is None or kind is None:
            return
        maps = self._source.maps(kind, self._step, self.merged)
        if maps is None or maps.shape[-2] == 0:
            return
        self._peak_pending = False
        self.layer_combo.blockSignals(True)  # the panel's pick, not the user's: not remembered as chosen
        self.layer_combo.setCurrentIndex(peaked_layer(maps))
        self.layer_combo.blockSignals(False)

    def _sync_kinds(self) -> None:
        source = self._source
        kinds = source.kinds() if source else []
        current = [self.kind_combo.itemData(i) for i in range(self.kind_combo.count())]
        if kinds != current:
            self.kind_combo.blockSignals(True)
            self.kind_combo.clear()
            for k in kinds:
                self.kind_combo.addItem(source.kind_info(k).label if source else k, k)
            preferred = self._chosen_kind if self._chosen_kind in kinds else "cross" if "cross" in kinds else None
            if preferred is not None:
                self.kind_combo.setCurrentIndex(kinds.index(preferred))
            self.kind_combo.blockSignals(False)
            self._sync_layers_heads()

    def _sync_layers_heads(self) -> None:
        kind = self.kind
        maps = self._source.maps(kind, self._step, self.merged) if self._source and kind else None
        layers, heads = (maps.shape[0], maps.shape[1]) if maps is not None else (0, 0)
        # the user's choice survives a new translation (the selectors are emptied meanwhile) and a restart;
        # without one, the last layer, the one the references show, or an LLM's most peaked one
        if self.chosen_layer is not None and self.chosen_layer < layers:
            layer = self.chosen_layer
        else:  # an LLM's most peaked layer is picked once there are output rows (``_settle_peaked_layer``)
            self._peak_pending = layers > 1 and self._source is not None and kind is not None \
                and self._source.opens_on_peaked_layer(kind)
            layer = layers - 1
        set_choices(self.layer_combo, [f"Layer {i + 1}" for i in range(layers)], layer, layers > 1)
        set_choices(self.head_combo, *head_choices(heads, self.chosen_head if self.chosen_head <= heads else 0),
                    heads > 1)
        self._settle_peaked_layer()

    def restore_choice(self, kind: str | None, layer: int, head: int) -> None:
        """The kind, layer (-1: none chosen) and head index remembered from the last session."""
        self._chosen_kind = kind
        self.chosen_layer = layer if layer >= 0 else None
        self.chosen_head = max(head, 0)

    def select(self, kind: str | None = None, layer: int | None = None,
               head: int | None | Literal["keep"] = "keep") -> None:
        """Programmatic selection (tests, the grid, saved settings); ``head=None`` means the mean."""
        if kind is not None and self.kind_combo.findData(kind) >= 0:
            self.kind_combo.setCurrentIndex(self.kind_combo.findData(kind))
        if layer is not None:
            self.layer_combo.setCurrentIndex(layer)
        if head is None:
            self.head_combo.setCurrentIndex(0)
        elif isinstance(head, int):
            self.head_combo.setCurrentIndex(head + 1)

    # -- drawing -----------------------------------------------------------------------------------------------------

    def redraw(self) -> None:
        source, kind = self._source, self.kind
        view = source.heatmap(kind, self.layer, self.head, self._step, self.merged) if source and kind else None
        if source is None or kind is None or view is None:
            self.heatmap.set_data(None)
            self.grid.set_maps(None)
            self.caption.clear()
            return
        title, outside, masked, window = self._draw_map(source, kind, view)
        windows = self._draw_grid(source, kind, outside)
        info, (_, about) = source.kind_info(kind), source.describe(kind)
        marks = Marks(outside, masked is not None, self.layer if window is not None else None,
                      windows is not None and any(w is not None and w.any() for w in windows),
                      any(r.kind in source.shared(kind) for r in self.heads_off))
        self.caption.setText(caption_text(title, info.query_axis, info.key_axis, about, marks))

    def _draw_map(self, source: AttentionSource, kind: str, view) -> tuple[str, bool, np.ndarray | None,
                                                                          np.ndarray | None]:
        """The large map of the step: its title, whether its values leave 0..1 (then on its own scale), the cells
        a query may not see and those outside the layer's sliding window."""
        matrix, rows, cols, highlight = view
        info = source.kind_info(kind)
        what, _ = source.describe(kind)
        masked = source.future(kind, self._step) if not self.merged else None
        head_text = "" if what and self.head_combo.count() <= 2 else " · mean of heads" if self.head is None \
            else f" · head {self.head + 1}"  # a quantity with one map per layer has no heads to name
        layer_text = "" if what and self.layer_combo.count() <= 1 else f" · layer {self.layer + 1}"  # no layers
        title = f"{what}{info.label}{layer_text}{head_text}"
        outside = bool(matrix.size) and (float(matrix.min()) < 0 or float(matrix.max()) > 1 + 1e-6)
        self.scale_combo.setEnabled(not outside)  # such a map is always drawn on its own scale: no choice to offer
        self.scale_combo.setToolTip("This quantity's values fall outside 0..1: each map uses its own colour scale"
                                    if outside else "Colour scale")
        window = source.outside(kind, self.layer, self._step) if not self.merged else None
        window = window if window is not None and window.shape == matrix.shape and window.any() else None
        self.heatmap.set_data(HeatmapData(matrix, tuple(rows), tuple(cols), info.query_axis, info.key_axis, title,
                                          highlight, self.per_map or outside, masked, float(matrix.min()) < 0,
                                          window))
        return title, outside, masked, window

    def _draw_grid(self, source: AttentionSource, kind: str, outside: bool) -> list | None:
        """The grid of every head of the step; the sliding-window cells of each layer's maps (None: none)."""
        maps = source.maps(kind, self._step, self.merged)
        shared = source.shared(kind)
        self.grid.set_groups(source.kv_heads())
        windows = None if maps is None or self.merged else [source.outside(kind, i, self._step)
                                                             for i in range(maps.shape[0])]
        self.grid.set_maps(maps, self.per_map or outside, None if self.head is None else (self.layer, self.head),
                           self.alignment_head if kind == "cross" else None,
                           {(r.layer, r.head) for r in self.heads_off if r.kind in shared},
                           signed=maps is not None and bool(maps.size) and float(np.nanmin(maps)) < 0,
                           outside=windows)
        return windows

    @Slot(int)
    def _on_kind_changed(self, index: int) -> None:
        self._chosen_kind = self.kind
        self._sync_layers_heads()
        self.redraw()
        self.selection_changed.emit()

    @Slot(int)
    def _on_selector_changed(self, index: int) -> None:
        if self.sender() is self.layer_combo:
            self.chosen_layer = self.layer_combo.currentIndex()
        elif self.sender() is self.head_combo:
            self.chosen_head = max(self.head_combo.currentIndex(), 0)
        self.redraw()
        self.selection_changed.emit()

    @Slot(bool)
    def _on_merge_toggled(self, on: bool) -> None:
        self._sync_layers_heads()
        self.redraw()
        self.selection_changed.emit()

    @Slot(int, int)
    def _on_grid_selected(self, layer: int, head: int) -> None:
        self.select(layer=layer, head=head)

    @Slot(int, int)
    def _on_grid_toggled(self, layer: int, head: int) -> None:
        if self.kind:
            self.head_toggled.emit(self.kind, layer, head)

    @Slot(int)
    def _on_grid_layer_toggled(self, layer: int) -> None:
        if self.kind:
            self.head_toggled.emit(self.kind, layer, -1)
