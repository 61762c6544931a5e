"""The two baselines drawn on the Analysis tab's AER map (issue 28): the best single head, framed, and the
diagonal baseline (target word j linked to source word round(j * m / n)), a line on the colour bar at its AER with
every head that aligns worse than it hatched, plus the sentence under the map that says what the marks mean and how
the gold file was read. Painting only; the figures are the engine's (``AlignmentReady``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPen

from attnviz.gui.attention.heatmap import BAR_GAP

if TYPE_CHECKING:
    from attnviz.engine.analysis.alignment import AlignmentReady
    from attnviz.session.attention.layout import Geometry

BAR_WIDTH = 12  # as the heatmap draws its colour bar


@dataclass(frozen=True)
class Baselines:
    """What the AER map marks: the best head (layer, head, AER) and the diagonal baseline's AER, 0-based cells."""

    best: tuple[int, int, float]
    diagonal: float | None
    gold: str = ""  # how the gold file was read

    @classmethod
    def of(cls, result: AlignmentReady) -> Baselines | None:
        best = result.best_head()
        if best is None:
            return None
        diagonal = result.scores.get("diagonal", {}).get("aer")
        return cls(best, None if diagonal is None else float(diagonal), str(result.settings.get("gold", "")))

    def worse(self, matrix: np.ndarray) -> np.ndarray:
        """[L, H] True where a head aligns worse than the diagonal baseline."""
        if self.diagonal is None:
            return np.zeros(matrix.shape, dtype=bool)
        return np.asarray(matrix) > self.diagonal

    def note(self, matrix: np.ndarray) -> str:
        layer, head, value = self.best
        text = f"Framed: the best single head, layer {layer + 1} head {head + 1} (AER {value:.3f})."
        if self.diagonal is not None:
            worse = int(self.worse(matrix).sum())
            text += (f" Diagonal baseline: AER {self.diagonal:.3f}, the black line on the colour bar; hatched: the "
                     f"{worse} of {matrix.size} heads that align worse than it.")
        return f"{text} {self.gold[:1].upper()}{self.gold[1:]}." if self.gold else text


def draw(painter: QPainter, cells: QRect, g: Geometry, matrix: np.ndarray, marks: Baselines,
         lo: float, hi: float) -> None:
    """Hatch the heads worse than the diagonal, frame the best head, and mark the diagonal on the colour bar."""
    painter.save()
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QBrush(QColor(0, 0, 0, 150), Qt.BrushStyle.BDiagPattern))
    for i, j in zip(*np.nonzero(marks.worse(matrix)), strict=True):
        painter.drawRect(QRectF(cells.left() + j * g.cell_w, cells.top() + i * g.cell_h, g.cell_w, g.cell_h))
    painter.setBrush(Qt.BrushStyle.NoBrush)
    layer, head, _ = marks.best
    box = QRectF(cells.left() + head * g.cell_w, cells.top() + layer * g.cell_h, g.cell_w, g.cell_h)
    for pen, inset in ((QPen(QColor(0, 0, 0), 4), 2.0), (QPen(QColor(255, 255, 255), 1.5), 4.5)):
        painter.setPen(pen)  # black outside, white inside: visible on every colour of the scale
        painter.drawRect(box.adjusted(inset, inset, -inset, -inset))
    if marks.diagonal is not None and hi > lo:
        bar = QRect(cells.right() + BAR_GAP, cells.top(), BAR_WIDTH, max(cells.height(), 60))
        share = min(max((marks.diagonal - lo) / (hi - lo), 0.0), 1.0)
        y = int(bar.bottom() - share * (bar.height() - 1))
        painter.setPen(QPen(QColor(0, 0, 0), 3))
        painter.drawLine(bar.left() - 5, y, bar.right() + 1, y)
    painter.restore()
