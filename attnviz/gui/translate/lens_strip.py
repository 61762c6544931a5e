"""The logit lens as a layer x step strip: a row per decoder layer (the last at the top, as the residual stream rises
to the output), a column per output step, each cell coloured by the language of that layer's top token at that step
(a heuristic guess, ``engine.text.token_language``; the colours are the exported figure's, ``plots.language_colours``)
and, where the cell has room, the token written in it (bold when it is the token finally chosen; a cell too small
for text shows a dark dot instead); the step shown is outlined. A legend under the cells names the colours and says
the guess is a heuristic; hovering a cell gives its exact values (top tokens with their probabilities, p(chosen),
rank, language); clicking one shows that step everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QPoint, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QHelpEvent, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from attnviz.engine.text.token_language import LANGUAGE_LABELS, LANGUAGES
from attnviz.engine.text.tokenize import visible_token
from attnviz.gui.widgets import guarded_paint, named
from attnviz.plots.language_colours import LANGUAGE_COLOURS

if TYPE_CHECKING:  # the module imports torch: the window opens without it
    from attnviz.engine.attribution.logit_lens import LogitLens

PAD, SWATCH, GAP = 4, 10, 8  # px: margins, the legend's colour squares, between legend entries
LEGEND_TITLE = "Top token's language (a heuristic guess):"
LABEL_W = 26  # px for the layer numbers at the left
MIN_TEXT_W = 30  # a cell this wide (and a line high) shows its top token


def cell_tip(lens: LogitLens, layer: int, step: int) -> str:
    """The exact values of one cell, as its tooltip says them."""
    tops = ", ".join(f"{visible_token(str(t))!r} {p:.4f}" for t, p in zip(lens.top_tokens[layer, step],
                                                                            lens.top_probs[layer, step]))
    language = LANGUAGE_LABELS.get(str(lens.top_language[layer, step]), "unknown")
    return (f"Layer {layer + 1}, step {step + 1} (chosen {visible_token(lens.tokens[step])!r})\n"
            f"top: {tops}\nlanguage of the top token: {language} (a heuristic guess)\n"
            f"p(chosen) {lens.chosen_prob[layer, step]:.6f}, rank {int(lens.chosen_rank[layer, step])}")


class LensStrip(QWidget):
    """The strip; ``set_lens`` gives it a ``LogitLens`` (None: empty), ``set_step`` the step outlined, ``on_pick``
    is called with the step of a clicked cell."""

    def __init__(self, on_pick: Callable[[int], None], parent: QWidget | None = None):
        super().__init__(parent)
        named(self, "logitLensStrip", "Logit lens strip", "Each decoder layer's top token per step, coloured by its "
              "language (a heuristic guess); hover a cell for its values, click it to show that step")
        self.lens: LogitLens | None = None
        self.step = -1
        self.on_pick = on_pick
        self.setMouseTracking(False)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def set_lens(self, lens: LogitLens | None) -> None:
        self.lens = lens
        self.update()

    def set_step(self, step: int) -> None:
        self.step = step
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        return QSize(240, 6 * self.fontMetrics().height() + self.legend_height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        return QSize(120, 3 * self.fontMetrics().height())

    def legend_height(self) -> int:
        return self.fontMetrics().height() * self._legend_lines(max(self.width(), 120)) + PAD

    def _legend_entries(self) -> list[tuple[str, int]]:
        """(language, px wide) of each entry, after the title (language "")."""
        metrics = self.fontMetrics()
        return [("", metrics.horizontalAdvance(LEGEND_TITLE) + GAP)] + [
            (lang, SWATCH + 3 + metrics.horizontalAdvance(LANGUAGE_LABELS[lang]) + GAP) for lang in LANGUAGES]

    def _legend_lines(self, width: int) -> int:
        lines, x = 1, PAD
        for _, w in self._legend_entries():
            if x + w > width - PAD and x > PAD:
                lines, x = lines + 1, PAD
            x += w
        return lines

    def grid_rect(self) -> QRect:
        """Where the cells are drawn."""
        return QRect(LABEL_W, PAD, max(self.width() - LABEL_W - PAD, 1),
                     max(self.height() - 2 * PAD - self.legend_height(), 1))

    def cell_at(self, pos: QPoint) -> tuple[int, int] | None:
        """(layer, step) of the cell under ``pos``, 0-based; None outside the cells."""
        lens, grid = self.lens, self.grid_rect()
        if lens is None or not grid.contains(pos) or not lens.tokens:
            return None
        step = int((pos.x() - grid.left()) * len(lens.tokens) / grid.width())
        row = int((pos.y() - grid.top()) * lens.layers / grid.height())
        return lens.layers - 1 - min(row, lens.layers - 1), min(step, len(lens.tokens) - 1)

    def cell_rect(self, layer: int, step: int) -> QRectF:
        lens, grid = self.lens, self.grid_rect()
        assert lens is not None
        w, h = grid.width() / len(lens.tokens), grid.height() / lens.layers
        return QRectF(grid.left() + step * w, grid.top() + (lens.layers - 1 - layer) * h, w, h)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent) and self.lens is not None:
            cell = self.cell_at(event.pos())
            if cell is not None:
                QToolTip.showText(event.globalPos(), cell_tip(self.lens, *cell), self)
                return True
        return super().event(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt's name)
        cell = self.cell_at(event.position().toPoint())
        if cell is not None and event.button() == Qt.MouseButton.LeftButton:
            self.on_pick(cell[1])
        super().mousePressEvent(event)

    @guarded_paint
    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt's name)
        painter = QPainter(self)
        lens = self.lens
        if lens is None or not lens.tokens:
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "The strip shows once the lens is read.")
            return
        metrics = QFontMetrics(self.font())
        for layer in range(lens.layers):
            for step in range(len(lens.tokens)):
                self._cell(painter, metrics, layer, step)
        self._labels(painter, metrics)
        if 0 <= self.step < len(lens.tokens):
            top, bottom = self.cell_rect(lens.layers - 1, self.step), self.cell_rect(0, self.step)
            painter.setPen(QPen(QColor("#d62728"), 2))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(top.united(bottom).adjusted(1, 1, -1, -1))
        self._legend(painter, metrics)

    def _cell(self, painter: QPainter, metrics: QFontMetrics, layer: int, step: int) -> None:
        lens = self.lens
        assert lens is not None
        rect = self.cell_rect(layer, step)
        painter.fillRect(rect, QColor(LANGUAGE_COLOURS.get(str(lens.top_language[layer, step]), "#D9D9D9")))
        painter.setPen(QPen(QColor("white"), 1))
        painter.drawRect(rect)
        chosen = int(lens.chosen_rank[layer, step]) == 1
        if rect.width() >= MIN_TEXT_W and rect.height() >= metrics.height():
            text = metrics.elidedText(visible_token(str(lens.top_tokens[layer, step, 0])), Qt.TextElideMode.ElideRight,
                                      int(rect.width()) - 4)
            painter.setPen(QColor("black"))
            font = painter.font()
            font.setBold(chosen)
            painter.setFont(font)
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
            font.setBold(False)
            painter.setFont(font)
        elif chosen:
            r = max(1.5, min(rect.width(), rect.height()) / 5)
            painter.setBrush(QColor("#222222"))
            painter.setPen(Qt.PenStyle.NoPen)
            painter.drawEllipse(rect.center(), r, r)
            painter.setBrush(Qt.BrushStyle.NoBrush)

    def _labels(self, painter: QPainter, metrics: QFontMetrics) -> None:
        """The layer numbers at the left, as many as fit."""
        lens = self.lens
        assert lens is not None
        every = max(1, -(-metrics.height() * lens.layers // max(self.grid_rect().height(), 1)))
        painter.setPen(self.palette().windowText().color())
        for layer in range(0, lens.layers, every):
            rect = self.cell_rect(layer, 0)
            painter.drawText(QRectF(0, rect.center().y() - metrics.height() / 2, LABEL_W - 4, metrics.height()),
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, str(layer + 1))

    def _legend(self, painter: QPainter, metrics: QFontMetrics) -> None:
        y = self.grid_rect().bottom() + PAD
        x = PAD
        for lang, w in self._legend_entries():
            if x + w > self.width() - PAD and x > PAD:
                x, y = PAD, y + metrics.height()
            painter.setPen(self.palette().windowText().color())
            if not lang:
                painter.drawText(QRect(x, y, w, metrics.height()), Qt.AlignmentFlag.AlignVCenter, LEGEND_TITLE)
            else:
                top = y + (metrics.height() - SWATCH) // 2
                painter.fillRect(QRect(x, top, SWATCH, SWATCH), QColor(LANGUAGE_COLOURS[lang]))
                painter.drawText(QRect(x + SWATCH + 3, y, w, metrics.height()), Qt.AlignmentFlag.AlignVCenter,
                                 LANGUAGE_LABELS[lang])
            x += w
