"""The Search tree page of the Translate tab: the tree, the n-best list beside it, and the what-if controls.

Plain widgets with signals; ``explorer.SearchExplorer`` fills them and acts on what the user picks:
``node_chosen(id)`` (a node clicked, Enter on it, or an n-best row), ``what_if(token)`` (decode on with this token
at the shown step), ``force_prefix(text)`` (decode on after a typed target prefix) and ``contrast(id)`` (an n-best
row's menu: why the answer's token and not this hypothesis's where it leaves the answer).
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QStringListModel, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCompleter,
    QGridLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from attnviz.engine.events import BeamNode
from attnviz.engine.text.tokenize import visible_token
from attnviz.gui.translate.beam_tree import PAD, ROW_H, BeamTreeView
from attnviz.gui.translate.layout import PAGE_ROWS
from attnviz.gui.widgets import copy_menu, copyable, named

LEGEND = ("<span style='color:#e67814'>\u25a0 chosen</span> · <span style='color:#28963c'>\u25a1 finished</span> · "
          "faded: pruned · <span style='color:#823cc8'>\u25a0 what-if</span> · edge width: probability")
LEGEND_ROOM = 420  # px: the panel's height from which the legend shows above the tree
TALL_ENOUGH = 260  # px: the panel's height from which the n-best list goes under the tree
WIDE_ENOUGH = 640  # px: the panel's width under which it goes under the tree whatever the height (a side column)
TEXT_MIN = 240  # px the Hypothesis column keeps before the score columns make way (their values stay in the tooltip)


class NBestTable(QTableWidget):
    """The n-best list: the Hypothesis column (1) stretches to the viewport and wraps; when the viewport is too
    narrow for it and the scores, the score columns are hidden (the row's tooltip and Ctrl+C still give them), so
    a hypothesis is never cut to its first words in a column wider than what is in sight."""

    SCORES = (2, 3)

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self.fit_columns()

    def fit_columns(self) -> None:
        scores = sum(self.sizeHintForColumn(c) for c in self.SCORES)
        narrow = self.viewport().width() - self.sizeHintForColumn(0) - scores < TEXT_MIN
        for c in self.SCORES:
            self.setColumnHidden(c, narrow)


class SearchPanel(QWidget):
    node_chosen = Signal(int)
    what_if = Signal(str)
    force_prefix = Signal(str)
    contrast = Signal(int)  # a hypothesis's end: why the answer's token and not this one's where it leaves

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("searchPanel")
        self.tree_view = BeamTreeView()
        self.tree_scroll = QScrollArea()
        self.tree_scroll.setObjectName("beamTreeScroll")
        self.tree_scroll.setWidgetResizable(True)
        self.tree_scroll.setWidget(self.tree_view)
        self._on_tree_laid_out(1)
        self.nbest = named(NBestTable(0, 4), "nbestTable", "n-best list",
                           "The finished hypotheses, best first, and the what-if branches; click one to show it; "
                           "Ctrl+C copies the selected rows")
        self.nbest.setHorizontalHeaderLabels(["#", "Hypothesis", "Normalised", "Log-prob"])
        copyable(self.nbest)
        self.nbest.customContextMenuRequested.disconnect()  # copyable's menu, and "Why this and not ...?"
        self.nbest.customContextMenuRequested.connect(self._on_menu)
        self.foils: dict[int, str] = {}  # node id -> its token where it leaves the answer (the explorer's)
        self.foil_now: str | None = None  # the foil of the contrast the map shows (the Quantity selector's)
        self.nbest.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.nbest.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.nbest.verticalHeader().hide()
        # whole hypotheses: ones that differ at the end must not look the same, so the text wraps (rows as tall as
        # it needs) and a word wider than the column is cut in the middle, keeping both ends; the tooltip and
        # Ctrl+C give the full text
        self.nbest.setWordWrap(True)
        self.nbest.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.nbest.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header = self.nbest.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.nbest.setMinimumSize(120, 36)  # its header and a line of a hypothesis; more scroll
        self.legend = QLabel(LEGEND)
        self.legend.setMinimumWidth(1)  # one line, unwrapped: a wrapped label would make the scroll area scroll
        self.tree_view.setToolTip(LEGEND.replace(" · ", "<br>"))
        self.legend.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._build_what_if()
        self._node_of_row: list[int] = []
        self._visible = QRect()
        self.tree_view.laid_out.connect(self._on_tree_laid_out)
        self.tree_view.activated.connect(self.node_chosen)
        self.tree_view.cursor_moved.connect(self._on_cursor_moved)
        self.nbest.cellClicked.connect(self._on_row_clicked)

    def _build_what_if(self) -> None:
        self.token_edit = named(QLineEdit(), "whatIfEdit", "What-if token",
                                "A token from the output vocabulary to take instead at the step shown (completion "
                                "offers the vocabulary); or double-click a candidate in the top-k chart")
        self.token_edit.setPlaceholderText("another token at this step")
        self.vocabulary = QStringListModel(self)  # what the what-if token completes from
        self.completer = QCompleter(self.vocabulary, self)
        self.completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.completer.setFilterMode(Qt.MatchFlag.MatchStartsWith)
        self.token_edit.setCompleter(self.completer)
        self.what_if_button = named(QPushButton("&Use it"), "whatIfButton", "Decode on with this token",
                                    "Take this token at the step shown and decode on from there: a new branch")
        self.prefix_edit = named(QLineEdit(), "prefixEdit", "Forced prefix",
                                 "Target text the decoder must start with; it decodes on after it")
        self.prefix_edit.setPlaceholderText("forced prefix, as text")
        self.prefix_button = named(QPushButton("Force &prefix"), "forcePrefixButton", "Decode after this prefix",
                                   "Force this target prefix and decode on: a new branch from the start")
        self.what_if_label = QLabel("&Branch with:")
        self.what_if_label.setBuddy(self.token_edit)
        self.token_edit.returnPressed.connect(self._on_what_if)
        self.what_if_button.clicked.connect(self._on_what_if)
        self.prefix_edit.returnPressed.connect(self._on_prefix)
        self.prefix_button.clicked.connect(self._on_prefix)
        row = QGridLayout()  # two rows: it fits the Translate tab's side column
        row.setContentsMargins(0, 0, 0, 0)
        row.setVerticalSpacing(2)
        for i, w in enumerate((self.what_if_label, self.token_edit, self.what_if_button)):
            row.addWidget(w, 0, i)
        row.addWidget(self.prefix_edit, 1, 0, 1, 2)
        row.addWidget(self.prefix_button, 1, 2)
        row.setColumnStretch(1, 1)
        self.splitter = splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.setObjectName("searchSplitter")
        splitter.addWidget(self.tree_scroll)
        splitter.addWidget(self.nbest)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 0)
        layout.setSpacing(4)
        layout.addWidget(self.legend)
        layout.addWidget(splitter, 1)
        layout.addLayout(row)

    @Slot(int)
    def _on_tree_laid_out(self, rows: int) -> None:
        """The tree's view keeps up to PAGE_ROWS of its rows in sight (and the scroll bar under them): the page
        scrolls rather than squeeze it."""
        bar = self.tree_scroll.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        shown = min(PAGE_ROWS, max(rows, 1))
        self.tree_scroll.setMinimumSize(160, shown * ROW_H + 2 * PAD + bar + 2 * self.tree_scroll.frameWidth())

    def resizeEvent(self, event) -> None:  # noqa: N802
        # a short page keeps the tree's rows, not the legend (the tree's tooltip has it)
        self.legend.setVisible(self.height() > LEGEND_ROOM)
        # the n-best list under the tree when there is height for both or the panel is a narrow side column, so the
        # tree and the hypotheses' text take the whole width; beside it only in a short, wide panel
        under = self.height() > TALL_ENOUGH or self.width() < WIDE_ENOUGH
        self.splitter.setOrientation(Qt.Orientation.Vertical if under else Qt.Orientation.Horizontal)

    def set_vocabulary(self, tokens: list[str]) -> None:
        self.vocabulary.setStringList(tokens)

    def set_rows(self, rows: list[tuple[str, BeamNode, str, float | None]], selected: int | None) -> None:
        """The n-best list: (rank label, node, hypothesis text, normalised score) per row; ``selected`` node's row
        is selected."""
        self.nbest.setRowCount(len(rows))
        self._node_of_row = [row[1].id for row in rows]
        for r, (rank, node, text, score) in enumerate(rows):
            normalised = "" if score is None else f"{score:.3f}"
            for c, value in enumerate((rank, text, normalised, f"{node.score:.3f}")):
                item = QTableWidgetItem(value)
                item.setToolTip(f"{rank}: {text} (normalised {normalised or '-'}, log-probability {node.score:.3f})")
                self.nbest.setItem(r, c, item)
        self.nbest.fit_columns()
        self.select_row(selected)

    def select_row(self, node_id: int | None) -> None:
        self.nbest.blockSignals(True)
        if node_id in self._node_of_row:
            self.nbest.selectRow(self._node_of_row.index(node_id))
        else:
            self.nbest.clearSelection()
        self.nbest.blockSignals(False)

    def row_menu(self, row: int) -> QMenu:
        """The n-best list's menu at ``row``: Copy, Copy all, and for a hypothesis that leaves the answer (a
        what-if branch, another beam hypothesis), why the answer's token and not its own at that step."""
        menu = copy_menu(self.nbest)
        node = self._node_of_row[row] if 0 <= row < len(self._node_of_row) else None
        if node in self.foils:
            menu.addSeparator()
            why = menu.addAction(f"Why this and not {visible_token(self.foils[node])!r}?")
            why.setCheckable(True)
            why.setChecked(self.foils[node] == self.foil_now)
            why.triggered.connect(lambda checked=False, n=node: self.contrast.emit(n))
        return menu

    @Slot(QPoint)
    def _on_menu(self, pos: QPoint) -> None:
        menu = self.row_menu(self.nbest.rowAt(pos.y()))
        menu.exec(self.nbest.viewport().mapToGlobal(pos))
        menu.deleteLater()

    @Slot(int, int)
    def _on_row_clicked(self, row: int, column: int) -> None:
        if 0 <= row < len(self._node_of_row):
            self.node_chosen.emit(self._node_of_row[row])

    @Slot(QRect)
    def _on_cursor_moved(self, rect: QRect) -> None:
        self._visible = rect
        QTimer.singleShot(0, self._ensure_visible)  # after the scroll area has taken the tree's new size

    @Slot()
    def _ensure_visible(self) -> None:
        rect = self._visible
        self.tree_scroll.ensureVisible(rect.center().x(), rect.center().y(), rect.width(), rect.height())

    @Slot()
    def _on_what_if(self) -> None:
        self.what_if.emit(self.token_edit.text().strip())

    @Slot()
    def _on_prefix(self) -> None:
        self.force_prefix.emit(self.prefix_edit.text())
