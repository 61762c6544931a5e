"""Where the heatmap's cells and labels go: cell size for "fit" or a zoom level, which labels fit (thinning), how
much room the label bands may take (capped, long labels elided), and the colour bar's ticks with enough digits.

Pure functions of sizes and font metrics, so the rules are tested without painting. Fit uses the width and the
height on their own (cells may be wider than tall, within ``MAX_ASPECT``, or within the ratio of the counts for a map
far longer one way, such as a 256-token answer), so a short, wide view is filled rather than left as a small square
or a strip. A label band never takes more than ``LABEL_SHARE`` of the view (nor ``MAX_LABEL``
pixels): one long token (``blockchain-transaktionen``) is elided, with the full text on hover, instead of squeezing
every cell. Labels shrink a little (down to ``MIN_LABEL_SCALE`` of the font) before they are thinned, and zooming
makes cells large enough to label them all, with scroll bars.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_LABEL = 140  # pixels a label band may take at most; longer labels are elided (full text in the tooltip)
LABEL_SHARE = 0.2  # ... and at most this share of the view's width (row labels) or height (column labels)
MIN_BAND = 48  # ... but never less than this, so a short view still shows a few letters of each label
AXIS_BAND = 20  # the axis title beside the row labels and under the column labels
MIN_ZOOM, MAX_ZOOM = 4.0, 96.0  # cell sizes (pixels) a zoom may choose
FIT_MAX_CELL = 72.0  # "fit" never makes cells larger than this (a 3-token map would otherwise be huge)
MAX_ASPECT = 3.0  # fitted cells are at most this many times wider than tall, or taller than wide...
MAX_STRETCH = 40.0  # ... unless one side has far more cells (a 256-token output over a 9-token sentence): then up to
# the ratio of the counts, capped here, so that the map is not squashed into a strip a few cells wide
MIN_LABEL_SCALE = 0.75  # labels may shrink to this share of the font before every other one is left out
MARGIN_RIGHT = 84  # colour bar and its tick labels, when the view does not measure its ticks


@dataclass(frozen=True)
class Geometry:
    left: int  # width of the row-label band plus the axis title
    top: int
    bottom: int  # depth of the rotated column labels plus the axis title
    cell_w: float  # pixels
    cell_h: float
    row_every: int  # draw every k-th row label
    col_every: int
    right: int = MARGIN_RIGHT  # colour bar and its ticks
    row_scale: float = 1.0  # label font scale that fits the rows (and the columns) without thinning, if any does
    col_scale: float = 1.0

    @property
    def cell(self) -> float:
        """The smaller side of a cell: what a zoom step starts from."""
        return min(self.cell_w, self.cell_h)

    @property
    def row_band(self) -> int:
        """Pixels a row label may take."""
        return self.left - AXIS_BAND - 6

    @property
    def col_band(self) -> int:
        return self.bottom - AXIS_BAND - 6

    def size(self, rows: int, cols: int) -> tuple[int, int]:
        """The widget size that shows every cell at this cell size."""
        return (self.left + math.ceil(self.cell_w * cols) + self.right,
                self.top + math.ceil(self.cell_h * rows) + self.bottom)


def label_every(cell: float, line: float) -> int:
    """Draw every k-th label so that labels ``line`` pixels tall never overlap in cells ``cell`` pixels apart."""
    return max(1, math.ceil(line / max(cell, 1e-6) - 1e-9))


def label_scale(cell: float, line: float) -> float:
    """The font scale that makes labels fit cells ``cell`` pixels apart, within [MIN_LABEL_SCALE, 1]."""
    return min(1.0, max(MIN_LABEL_SCALE, cell / max(line, 1e-6)))


def band_cap(extent: int) -> int:
    """The most pixels a label band may take in a view ``extent`` pixels across."""
    return int(min(MAX_LABEL, max(MIN_BAND, LABEL_SHARE * extent)))


def label_band(widths: list[int], cap: int = MAX_LABEL) -> int:
    """Pixels of the label band: the widest label (plus a little room, as text drawn with antialiasing can take a
    pixel or two more than its advance and would be elided), capped at ``cap`` (longer ones are elided)."""
    return min(max(widths, default=0) + 6, cap)


def aspect_limit(rows: int, cols: int) -> float:
    """How much wider than tall (or taller than wide) a fitted cell may be: MAX_ASPECT, or the ratio of the counts
    when one side has far more cells (at most MAX_STRETCH)."""
    ratio = max(rows, 1) / max(cols, 1)
    return min(MAX_STRETCH, max(MAX_ASPECT, ratio, 1 / ratio))


def fitted_cells(avail_w: float, avail_h: float, rows: int, cols: int) -> tuple[float, float]:
    """Cell width and height that fill ``avail_w`` x ``avail_h``, each at most FIT_MAX_CELL and within
    ``aspect_limit``."""
    aspect = aspect_limit(rows, cols)
    cw = min(avail_w / max(cols, 1), FIT_MAX_CELL)
    ch = min(avail_h / max(rows, 1), FIT_MAX_CELL)
    cw, ch = min(cw, ch * aspect), min(ch, cw * aspect)
    return max(1.0, cw), max(1.0, ch)


def geometry(width: int, height: int, rows: int, cols: int, row_widths: list[int], col_widths: list[int],
             line: int, has_title: bool, zoom: float | None, right: int = MARGIN_RIGHT) -> Geometry:
    """Cells fitted into ``width`` x ``height`` (``zoom`` None) or ``zoom`` pixels each (the view then scrolls)."""
    left = label_band(row_widths, band_cap(width)) + AXIS_BAND + 6
    bottom = label_band(col_widths, band_cap(height)) + AXIS_BAND + 6
    top = line + 8 if has_title else 8
    if zoom is None:
        cw, ch = fitted_cells(width - left - right, height - top - bottom, rows, cols)
    else:
        cw = ch = min(max(zoom, MIN_ZOOM), MAX_ZOOM)
    row_scale, col_scale = label_scale(ch, line), label_scale(cw, line)
    return Geometry(left, top, bottom, cw, ch, label_every(ch, line * row_scale), label_every(cw, line * col_scale),
                    right, row_scale, col_scale)


def shown_labels(count: int, every: int, cell: float, line: float, keep: int | None = None) -> list[int]:
    """Indices of the labels drawn: every ``every``-th, and always ``keep`` (the current row), whose neighbours
    that would overlap it are left out instead."""
    shown = list(range(0, count, every))
    if keep is None or not 0 <= keep < count or keep in shown:
        return shown
    return sorted([i for i in shown if abs(i - keep) * cell >= line] + [keep])


def zoomed(cell: float, factor: float) -> float:
    """The next zoom level from the current cell size."""
    return min(max(cell * factor, MIN_ZOOM), MAX_ZOOM)


def colour_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round values between ``lo`` and ``hi`` (both ends included) for the colour bar."""
    if not (hi > lo):
        return [lo]
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    inner = [math.ceil(lo / step) * step + i * step for i in range(count + 2)]
    inner = [v for v in inner if lo + step / 4 < v < hi - step / 4]
    return [lo, *inner, hi]


def tick_digits(lo: float, hi: float) -> int:
    """Decimals that tell ticks of [lo, hi] apart: 2 for 0..1, more for a narrow per-map range."""
    span = hi - lo
    if span <= 0:
        return 3
    return min(6, max(2, 1 - math.floor(math.log10(span / 5))))
