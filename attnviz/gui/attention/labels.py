"""Which row and column labels the heatmap draws, where, and as what text (elided with "…" when longer than the
band), so that painting, tooltips and tests read one plan instead of each working it out again.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFont, QFontMetrics

from attnviz.engine.text.tokenize import piece_label
from attnviz.session.attention.layout import AXIS_BAND, Geometry, shown_labels


@dataclass(frozen=True)
class DrawnLabel:
    axis: str  # "row" or "column"
    index: int
    text: str  # as drawn: the token (a piece's "▁" as a quiet "·"), or its start and "…" when longer than the band
    full: str
    rect: QRect  # the text's box in widget coordinates (a column label's box is upright: it is drawn rotated)

    @property
    def elided(self) -> bool:
        return self.text != piece_label(self.full)


def scaled_font(base: QFont, scale: float) -> QFont:
    """``base`` at ``scale`` of its size (labels shrink a little before they are thinned)."""
    font = QFont(base)
    if scale < 1.0:
        if base.pointSizeF() > 0:
            font.setPointSizeF(base.pointSizeF() * scale)
        else:
            font.setPixelSize(max(6, round(base.pixelSize() * scale)))
    return font


def plan_labels(rows: tuple[str, ...], cols: tuple[str, ...], cells: QRect, g: Geometry, base: QFont,
                highlight: int | None) -> list[DrawnLabel]:
    """The labels drawn for cells at ``cells`` laid out by ``g``: every ``g.row_every``-th row (always the
    highlighted one) and every ``g.col_every``-th column, elided to their bands."""
    plan = []
    metrics = QFontMetrics(scaled_font(base, g.row_scale))
    line = metrics.height()
    for i in shown_labels(len(rows), g.row_every, g.cell_h, line * 0.9, highlight):
        y = int(cells.top() + (i + 0.5) * g.cell_h)
        text = metrics.elidedText(piece_label(rows[i]), Qt.TextElideMode.ElideRight, g.row_band)
        plan.append(DrawnLabel("row", i, text, rows[i], QRect(AXIS_BAND, y - line // 2, g.row_band, line)))
    metrics = QFontMetrics(scaled_font(base, g.col_scale))
    line = metrics.height()
    for j in shown_labels(len(cols), g.col_every, g.cell_w, line * 0.9):
        x = int(cells.left() + (j + 0.5) * g.cell_w)
        text = metrics.elidedText(piece_label(cols[j]), Qt.TextElideMode.ElideRight, g.col_band)
        plan.append(DrawnLabel("column", j, text, cols[j], QRect(x - line // 2, cells.bottom() + 6, line, g.col_band)))
    return plan
