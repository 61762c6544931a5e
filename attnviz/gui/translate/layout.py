"""The Translate tab laid out around its attention map, as a map-centred tool is: the map (with its selectors above
and the playback bar under it) takes what the window has; a side column holds, top to bottom, the token strips with
the translated text, its Copy button and the suspect verdict, the top-k chart, and the Steps / Search tree / Heads
off / Logit lens pages; the head grid and the caption share a narrow column beside the map.

Three splitters: the map against the side column, the map against the grid column (inside the attention panel),
and the side column's three parts. Until the user moves one (or one is restored from the settings), every resize
sizes them from the window: the side column about a quarter of the width, the grid column an eighth, within
bounds, so a larger window gives its extra pixels to the map. The side column's heights come from what each part
needs (``Needs``): the strips and the verdict their content (up to half the column, then they scroll), the open
page ``PAGE_ROWS`` rows, the chart its one-column height when that leaves the page its rows, else its two-column
one (the page gets the rest); if the page still lacks its rows, the suspect score under the text shows its verdict
alone (the whole line in its tooltip). Heights the user chose for the strips and the chart are kept (saved as
numbers) and the page takes the rest; where that leaves a part less than it needs (a split chosen on a taller
screen), they are corrected on every resize, page change and change of content, taking from the parts with room to
spare.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from PySide6.QtCore import QEvent, QObject, QSettings, Qt, QTimer
from PySide6.QtWidgets import QScrollArea, QSplitter, QTabWidget, QVBoxLayout, QWidget

from attnviz.gui.attention.panel import AttentionPanel

SIDE_SHARE, SIDE_MIN, SIDE_MAX = 0.25, 300, 460  # the side column: share of the tab's width, bounds in px
GRID_SHARE, GRID_MIN, GRID_MAX = 0.12, 140, 280  # the grid column beside the map
MAP_SHARE = 0.57  # the least of the tab's width the map keeps when the user chose the columns' widths (at 1024 px,
# what the window's own sizes leave it, a fifth of the window's area for its cells)
STRIPS_SHARE = 0.5  # the strips, text and verdict take at most this share of the side column (the strips scroll)
SPACING = 2  # px between the strips and the text under them
PAGE_ROWS = 6  # rows (or tree rows) the open page shows without scrolling
# what the user chose, kept as numbers (a splitter state restored before the window is laid out comes back scaled
# to a column that is not there yet): the side and grid columns' widths, the strips' and the chart's heights
WIDTHS_KEY, HEIGHTS_KEY = "translate/layout/widths", "translate/layout/sideHeights"  # "340,163", "175,217"
OLD_KEYS = ("translate/layout/main", "translate/layout/side", "translate/layout/attention")  # splitter states


def numbers(text: object) -> list[int] | None:
    """Two whole numbers "a,b" read back from the settings, or None."""
    parts = str(text or "").split(",")
    return [int(p) for p in parts] if len(parts) == 2 and all(p.strip().isdigit() for p in parts) else None


def side_width(width: int) -> int:
    return int(min(max(SIDE_SHARE * width, SIDE_MIN), SIDE_MAX))


def grid_width(width: int) -> int:
    return int(min(max(GRID_SHARE * width, GRID_MIN), GRID_MAX))


def narrowed(width: int, side: int, grid: int) -> tuple[int, int]:
    """The side and grid columns a user chose, narrowed (the side column first, each down to its width from the
    window) until the map keeps ``MAP_SHARE`` of a tab ``width`` px wide, as the window's own sizes leave it."""
    over = side + grid - int((1 - MAP_SHARE) * width)
    if over > 0:
        cut = min(over, max(side - side_width(width), 0))
        side, over = side - cut, over - cut
    if over > 0:
        grid -= min(over, max(grid - grid_width(width), 0))
    return side, grid


class Shortening(Protocol):
    """Lines under the translated text that can shorten to what matters most (the suspect score to its verdict)."""

    compact: bool

    def set_compact(self, compact: bool) -> None: ...

    def extra_height(self, width: int) -> int:
        """The px the full form takes beyond the short one at ``width``."""
        ...


@dataclass(frozen=True)
class Needs:
    """What the side column's parts need, in px: the strips with the text and verdict (their content), the chart in
    one column and in two, the open page."""

    strips: int
    chart: int
    chart_least: int
    page: int

    def floors(self, total: int) -> list[int]:
        """The least each part keeps in a column ``total`` px high."""
        return [min(self.strips, int(STRIPS_SHARE * total)), self.chart_least, self.page]


def allocate(total: int, needs: Needs) -> list[int]:
    """The side column's heights for ``total`` px: the strips their content (up to their share), the chart one
    column if that leaves the page its rows, else two; the page the rest (its rows, and more rows when there is
    room: a two-column chart taller than it needs would only space its bars out)."""
    strips = min(needs.strips, int(STRIPS_SHARE * total))
    rest = total - strips
    chart = needs.chart if rest - needs.chart >= needs.page else needs.chart_least
    return [strips, chart, max(rest - chart, 1)]


def correct(sizes: Sequence[int], needs: Needs) -> list[int]:
    """``sizes`` (chosen by the user, or restored; the last may be negative when the others were chosen on a taller
    screen) with each part raised to its floor where the others can spare it, each giving no more than its own
    excess over its floor, the one with the most to spare first (the page's rows first, then the strips)."""
    sizes = list(sizes)
    floors = needs.floors(sum(sizes))
    for i in (2, 0, 1):
        for j in sorted((j for j in range(len(sizes)) if j != i), key=lambda j: floors[j] - sizes[j]):
            give = min(floors[i] - sizes[i], sizes[j] - floors[j])
            if give > 0:
                sizes[i] += give
                sizes[j] -= give
    return [max(size, 1) for size in sizes]


class TranslateLayout(QObject):
    """The tab's splitters and the rule that sizes them; ``main`` goes into the tab's layout."""

    def __init__(self, attention: AttentionPanel, playback: QWidget, tokens: QScrollArea, text: QWidget,
                 topk: QWidget, pages: QTabWidget, page_need: Callable[[], int], lines: Shortening | None = None):
        super().__init__(attention)
        self.attention, self.tokens, self.text, self.topk, self.page_need = attention, tokens, text, topk, page_need
        self.lines = lines
        map_box = QWidget()
        column = QVBoxLayout(map_box)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(attention, 1)
        column.addWidget(playback)  # the timeline under the map it scrubs
        self.side = QSplitter(Qt.Orientation.Vertical)
        self.side.setObjectName("translateSideSplitter")
        self.strips = QWidget()
        strips_column = QVBoxLayout(self.strips)
        strips_column.setContentsMargins(0, 0, 0, 0)
        strips_column.setSpacing(SPACING)
        strips_column.addWidget(tokens, 1)
        tokens.setMinimumHeight(tokens.fontMetrics().height() + 8)  # a row of chips: the needs size it, not Qt's hint
        strips_column.addWidget(text)
        for widget in (self.strips, topk, pages):
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
        self._chosen: list[int] | None = None  # the strips' and the chart's heights the user chose (or restored)
        self._widths: list[int] | None = None  # the side and grid columns' widths the user chose (or restored)
        self.side.splitterMoved.connect(self._on_side_moved)
        self._refit = QTimer(self)  # what a part needs changed (a strip's rows, the verdict, a page's caption)
        self._refit.setSingleShot(True)
        self._refit.setInterval(0)
        self._refit.timeout.connect(self.fit_side)
        watched = [tokens.widget(), text, topk, *(pages.widget(i) for i in range(pages.count()))]
        for widget in (w for w in watched if w is not None):
            widget.installEventFilter(self)
        self.main.splitterMoved.connect(self._refit.start)  # a narrower column wraps the strips onto more rows

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.LayoutRequest:
            self._refit.start()
        return False

    def splitters(self) -> tuple[QSplitter, QSplitter, QSplitter]:
        return self.main, self.side, self.attention.splitter

    def fit(self, width: int, height: int) -> None:
        """Size the splitters for a tab ``width`` x ``height``: the side column's heights from what its parts need;
        the widths from the window while the user has not chosen them, else the chosen ones, narrowed where they
        would leave the map less than its share (chosen on a wider screen)."""
        if self.automatic:
            side = side_width(width)
            self.main.setSizes([max(width - side, 1), side])
            grid = grid_width(width)
            self.attention.splitter.setSizes([max(width - side - grid, 1), grid])
        else:
            now = self.widths()
            side, grid = narrowed(width, *(self._widths or now))
            if [side, grid] != now:
                main, maps = sum(self.main.sizes()) or width, sum(self.attention.splitter.sizes()) or width - side
                self.main.setSizes([max(main - side, 1), side])
                self.attention.splitter.setSizes([max(maps - grid, 1), grid])
        self.fit_side()

    def needs(self) -> Needs:
        """What each part of the side column needs at its width now."""
        strips = self.tokens.widget()
        width = self.text.width() or self.strips.width()
        text = self.text.heightForWidth(width) if self.text.hasHeightForWidth() else -1
        content = strips.sizeHint().height() + 2 * self.tokens.frameWidth() if strips is not None else 0
        wanted = content + SPACING + (text if text > 0 else self.text.sizeHint().height())
        return Needs(wanted, self.topk.sizeHint().height(), self.topk.minimumSizeHint().height(), self.page_need())

    def fit_side(self) -> None:
        """The side column's heights: from the needs while automatic, else the user's corrected where a part lacks
        what it needs; when the open page would still lack its rows, the lines under the text (the suspect score)
        shorten to their verdict."""
        total = self.side.height() - self.side.handleWidth() * (self.side.count() - 1)
        if total <= 0:
            return
        needs, lines = self.needs(), self.lines
        extra = lines.extra_height(self.text.width() or self.strips.width()) if lines is not None else 0
        full = dataclasses.replace(needs, strips=needs.strips + (extra if lines is not None and lines.compact else 0))
        sizes = self._sizes(total, full)
        short = extra > 0 and sizes[2] < needs.page
        if short:
            sizes = self._sizes(total, dataclasses.replace(full, strips=full.strips - extra))
        if lines is not None:
            lines.set_compact(short)
        if sizes != self.side.sizes():
            self.side.setSizes(sizes)

    def _sizes(self, total: int, needs: Needs) -> list[int]:
        if self.automatic:
            return allocate(total, needs)
        chosen = self._chosen  # the page takes what the strips and the chart chosen leave
        return correct([*chosen, total - sum(chosen)] if chosen else self.side.sizes(), needs)

    def _on_moved(self, pos: int, index: int) -> None:
        self.automatic = False
        self._widths = self.widths()

    def widths(self) -> list[int]:
        """The side column's and the grid column's widths now."""
        return [self.main.sizes()[1], self.attention.splitter.sizes()[1]]

    def _on_side_moved(self, pos: int, index: int) -> None:
        self._chosen = self.side.sizes()[:2]

    def save(self, settings: QSettings) -> None:
        for key in OLD_KEYS:
            settings.remove(key)
        if self.automatic:  # nothing chosen: the next window sizes itself for its screen
            settings.remove(WIDTHS_KEY)
            settings.remove(HEIGHTS_KEY)
            return
        settings.setValue(WIDTHS_KEY, ",".join(str(n) for n in self.widths()))
        settings.setValue(HEIGHTS_KEY, ",".join(str(n) for n in self.side.sizes()[:2]))

    def restore(self, settings: QSettings) -> None:
        """The widths and heights the user chose, applied (and corrected where they no longer fit) once the tab is
        laid out."""
        self._widths, self._chosen = numbers(settings.value(WIDTHS_KEY)), numbers(settings.value(HEIGHTS_KEY))
        if self._widths is not None or self._chosen is not None:
            self.automatic = False
