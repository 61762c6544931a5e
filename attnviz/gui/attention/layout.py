"""Where the heatmap's cells and labels go: cell size for "fit" or a zoom level, which labels fit (thinning), how
long a label may be (elided, never clipped silently), and the colour bar's ticks with enough digits.

Pure functions of sizes and font metrics, so the rules are tested without painting. A long input used to give
square cells of a few pixels with every label drawn over its neighbours; now only every k-th label is drawn when
cells are shorter than a line of text, labels longer than ``MAX_LABEL`` pixels end in an ellipsis (the full token
is in the tooltip), and zooming makes cells large enough to label them all, with scroll bars.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_LABEL = 140  # pixels a token label may take before it is elided
MIN_ZOOM, MAX_ZOOM = 4.0, 96.0  # cell sizes (pixels) a zoom may choose
FIT_MAX_CELL = 72.0  # "fit" never makes cells larger than this (a 3-token map would otherwise be huge)
MARGIN_RIGHT = 84  # colour bar and its tick labels


@dataclass(frozen=True)
class Geometry:
    left: int  # width of the row-label band (plus the axis title)
    top: int
    bottom: int  # depth of the rotated column labels (plus the axis title)
    cell: float  # cell width = height, pixels
    row_every: int  # draw every k-th row label
    col_every: int

    def size(self, rows: int, cols: int) -> tuple[int, int]:
        """The widget size that shows every cell at this cell size."""
        return (self.left + math.ceil(self.cell * cols) + MARGIN_RIGHT,
                self.top + math.ceil(self.cell * rows) + self.bottom)


def label_every(cell: float, line: int) -> int:
    """Draw every k-th label so that labels ``line`` pixels tall never overlap in cells ``cell`` pixels apart."""
    return max(1, math.ceil(line / max(cell, 1e-6)))


def label_band(widths: list[int]) -> int:
    """Pixels of the label band: the widest label (plus a little room, as text drawn with antialiasing can take a
    pixel or two more than its advance and would be elided), capped at MAX_LABEL (longer ones are elided)."""
    return min(max(widths, default=0) + 6, MAX_LABEL)


def geometry(width: int, height: int, rows: int, cols: int, row_widths: list[int], col_widths: list[int],
             line: int, has_title: bool, zoom: float | None) -> Geometry:
    """Cells fitted into ``width`` x ``height`` (``zoom`` None) or ``zoom`` pixels each (the view then scrolls)."""
    left = label_band(row_widths) + 34
    bottom = label_band(col_widths) + 30
    top = line + 10 if has_title else 8
    if zoom is None:
        avail_w, avail_h = width - left - MARGIN_RIGHT, height - top - bottom
        cell = max(1.0, min(avail_w / max(cols, 1), avail_h / max(rows, 1), FIT_MAX_CELL))
    else:
        cell = min(max(zoom, MIN_ZOOM), MAX_ZOOM)
    return Geometry(left, top, bottom, cell, label_every(cell, line), label_every(cell, line))


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
