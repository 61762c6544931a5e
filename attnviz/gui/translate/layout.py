"""The Translate tab laid out around its attention map, as a map-centred tool is: the map (with its selectors above
and the playback bar under it) takes what the window has; a side column holds the token strips (scrolled) and under
them the translated text with its Copy button (always in sight), the top-k chart at the height of its content, and
the Steps / Search tree / Heads off pages; the head grid and the caption share a narrow column beside the map.

Three splitters: the map against the side column, the map against the grid column (inside the attention panel),
and the side column's three parts. Until the user moves one (or one is restored from the settings), every resize
sizes them from the window: the side column about a quarter of the width, the grid column an eighth, within
bounds, so a larger window gives its extra pixels to the map.
"""

from __future__ import annotations

from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QScrollArea, QSplitter, QTabWidget, QVBoxLayout, QWidget

from attnviz.gui.attention.panel import AttentionPanel

SIDE_SHARE, SIDE_MIN, SIDE_MAX = 0.25, 300, 460  # the side column: share of the tab's width, bounds in px
GRID_SHARE, GRID_MIN, GRID_MAX = 0.12, 140, 280  # the grid column beside the map
TOKENS_SHARE = 0.35  # the token strips take at most this share of the side column's height (they scroll)
KEYS = {"main": "translate/layout/main", "side": "translate/layout/side", "attention": "translate/layout/attention"}


def side_width(width: int) -> int:
    return int(min(max(SIDE_SHARE * width, SIDE_MIN), SIDE_MAX))


def grid_width(width: int) -> int:
    return int(min(max(GRID_SHARE * width, GRID_MIN), GRID_MAX))


class TranslateLayout:
    """The tab's splitters and the rule that sizes them; ``main`` goes into the tab's layout."""

    def __init__(self, attention: AttentionPanel, playback: QWidget, tokens: QScrollArea, text: QWidget,
                 topk: QWidget, pages: QTabWidget):
        self.attention, self.tokens, self.text, self.topk = attention, tokens, text, topk
        map_box = QWidget()
        column = QVBoxLayout(map_box)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(attention, 1)
        column.addWidget(playback)  # the timeline under the map it scrubs
        self.side = QSplitter(Qt.Orientation.Vertical)
        self.side.setObjectName("translateSideSplitter")
        strips = QWidget()
        strips_column = QVBoxLayout(strips)
        strips_column.setContentsMargins(0, 0, 0, 0)
        strips_column.addWidget(tokens, 1)
        strips_column.addWidget(text)
        for widget in (strips, topk, pages):
            self.side.addWidget(widget)
        self.side.setStretchFactor(2, 1)  # a taller window lengthens the pages, not the chart
        self.main = QSplitter(Qt.Orientation.Horizontal)
        self.main.setObjectName("translateSplitter")
        self.main.addWidget(map_box)
        self.main.addWidget(self.side)
        self.main.setStretchFactor(0, 1)
        self.main.setStretchFactor(1, 0)
        for splitter in self.splitters():
            splitter.setChildrenCollapsible(False)
            splitter.splitterMoved.connect(self._on_moved)
        self.automatic = True  # sized from the window until the user moves a splitter or one is restored

    def splitters(self) -> tuple[QSplitter, QSplitter, QSplitter]:
        return self.main, self.side, self.attention.splitter

    def fit(self, width: int, height: int) -> None:
        """Size the splitters for a tab ``width`` x ``height`` (only while the user has not chosen sizes)."""
        if not self.automatic:
            return
        side = side_width(width)
        self.main.setSizes([max(width - side, 1), side])
        grid = grid_width(width)
        self.attention.splitter.setSizes([max(width - side - grid, 1), grid])
        self.fit_side(height)

    def fit_side(self, height: int | None = None) -> None:
        """The side column: the top-k chart at its content's height, the strips at theirs (up to a share), the
        pages the rest."""
        if not self.automatic:
            return
        total = height if height is not None else sum(self.side.sizes())
        chart = self.topk.sizeHint().height()
        strips = self.tokens.widget()
        wanted = strips.sizeHint().height() + 4 if strips is not None else 0
        text = self.text.sizeHint().height() + 6  # the layout's spacing
        tokens = min(wanted, int(TOKENS_SHARE * total)) + text
        self.side.setSizes([tokens, chart, max(total - tokens - chart, 1)])

    def _on_moved(self, pos: int, index: int) -> None:
        self.automatic = False

    def save(self, settings: QSettings) -> None:
        if self.automatic:  # nothing chosen: the next window sizes itself for its screen
            for key in KEYS.values():
                settings.remove(key)
            return
        for key, splitter in zip(KEYS.values(), self.splitters()):
            settings.setValue(key, splitter.saveState())

    def restore(self, settings: QSettings) -> None:
        for key, splitter in zip(KEYS.values(), self.splitters()):
            state = settings.value(key)
            if state is not None and splitter.restoreState(state):
                self.automatic = False
