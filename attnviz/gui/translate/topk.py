"""The top-k chart of a step: the best candidates as horizontal bars with exact probabilities, the token taken
marked; in one column when the side column gives it a line per candidate, else in two side by side (every
candidate still shown). A candidate's menu decodes on with it (a what-if) or asks why the step's token and not it (a
contrastive attribution); the foil of the contrast the map shows is framed and checked there.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QRect, QSize, Qt, Signal
from PySide6.QtGui import QFontMetrics, QMouseEvent, QPainter, QPalette, QPen
from PySide6.QtWidgets import QMenu, QWidget

from attnviz.engine.text.tokenize import piece_label, visible_token
from attnviz.gui.accessible import announce
from attnviz.gui.attention.colormap import color_at
from attnviz.gui.widgets import guarded_paint

ROW_GAP = 1  # px between the chart's rows in one column


class TopKView(QWidget):
    """The best candidates of one step as horizontal bars with exact probabilities; the chosen one first.

    Double-clicking a candidate (or "Decode on with ..." in its context menu) emits ``alternative(token)``: a what-if
    that takes it at this step instead."""

    alternative = Signal(str)
    foil = Signal(str)  # "why the chosen token and not this one?": a contrastive attribution

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("topkView")
        self.setAccessibleName("Best next-token candidates")
        self._items: list[tuple[str, float]] = []
        self._entropy: float | None = None
        self._chosen: tuple[str, float] | None = None
        self._forced = False  # the step's token was given, not chosen
        self.foil_shown: str | None = None  # the contrastive attribution's foil shown in the map, framed here
        self.placeholder = "The likeliest next tokens appear here"
        self.setMinimumWidth(200)
        self._rows: list[QRect] = []

    def set_candidates(self, items: Sequence[tuple[str, float]], entropy: float | None,
                       chosen: tuple[str, float] | None = None, forced: bool = False) -> None:
        """The top-k ``items`` (token, probability) and the token the step took, which sampling may draw from
        further down (or from outside the top k); ``forced``: the step took it without a choice (a multilingual
        model's target language, a forced end, a typed prefix), so the bars are what the model would have chosen
        from and none is marked taken."""
        self._items, self._entropy, self._forced = list(items), entropy, forced
        self._chosen = chosen if chosen is not None else (self._items[0] if self._items else None)
        self.setToolTip("\n".join(f"{visible_token(t)}: {p:.4f}" + (" (chosen)" if self._is_chosen(t) else "")
                                  for t, p in self._items) + ("\nDouble-click one to decode on with it instead"
                                                              if self._items else ""))
        self.update()
        announce(self)

    def set_foil(self, foil: str | None) -> None:
        """The foil of the contrastive attribution the map shows (None: none): framed in the chart, checked in its
        menu, so the Quantity selector's foil and the chart's agree."""
        if foil != self.foil_shown:
            self.foil_shown = foil
            self.update()

    def _is_chosen(self, token: str) -> bool:
        return not self._forced and self._chosen is not None and token == self._chosen[0]

    def _forced_line(self) -> str:
        taken = visible_token(self._chosen[0]) if self._chosen else "?"
        return f"Forced: {taken}, not chosen; the model's own top {len(self._items)} were"

    def accessible_value(self) -> str:
        if not self._items:
            return self.placeholder
        chosen = f"Chosen: {visible_token(self._chosen[0])} ({self._chosen[1]:.3f}). " if self._chosen else ""
        chosen = self._forced_line() + ". " if self._forced else chosen
        return chosen + "Candidates: " + ", ".join(f"{visible_token(t)} {p:.3f}" for t, p in self._items)

    def sizeHint(self) -> QSize:
        """As tall as its content in one column: a line of title and a line per candidate (ten before the first
        step)."""
        return QSize(260, self._height(1))

    def minimumSizeHint(self) -> QSize:
        """Two columns of candidates: what a short side column gives it, every candidate still shown."""
        return QSize(200, self._height(2))

    def _height(self, columns: int) -> int:
        """A line of title and the rows of candidates in ``columns`` columns."""
        line = self.fontMetrics().height()
        return line + 2 + -(-max(len(self._items), 10) // columns) * (line + (ROW_GAP if columns == 1 else 0))

    def _title_lines(self, metrics) -> list[str]:
        lines = [self._forced_line() if self._forced else f"Top {len(self._items)} candidates"]
        if self._entropy is not None:
            lines.append(f"entropy {self._entropy:.3f} nats")
        if not self._forced and self._chosen is not None and not any(self._is_chosen(t) for t, _ in self._items):
            drawn = visible_token(self._chosen[0])
            lines.append(f"drawn: {drawn} ({self._chosen[1]:.4f}), not in the top {len(self._items)}")
        if metrics.horizontalAdvance(" · ".join(lines)) <= self.width() - 8:
            lines = [" · ".join(lines)]  # wide enough: one line leaves more room for the bars
        return lines

    @guarded_paint
    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        pal = self.palette()
        painter.setPen(pal.color(QPalette.ColorRole.WindowText))
        if not self._items:
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.placeholder)
            return
        metrics = painter.fontMetrics()
        lines, line_h = self._title_lines(metrics), metrics.height()
        for n, text in enumerate(lines):  # a line each rather than one clipped line
            painter.drawText(QRect(4, n * line_h, self.width() - 8, line_h), Qt.AlignmentFlag.AlignLeft,
                             metrics.elidedText(text, Qt.TextElideMode.ElideRight, self.width() - 8))
        self._rows = self._cells(len(lines) * line_h + 2, line_h)
        for rect, (tok, p) in zip(self._rows, self._items):
            self._paint_bar(painter, rect, tok, p)

    def _cells(self, top: int, line_h: int) -> list[QRect]:
        """Each candidate's rectangle: one column while every row gets a line of text, else two side by side."""
        n, room = len(self._items), self.height() - top
        columns = 1 if room >= n * (line_h + ROW_GAP) else 2
        per_column = -(-n // columns)
        row_h = max(line_h, room // per_column)
        width = self.width() // columns
        return [QRect((i // per_column) * width, top + (i % per_column) * row_h, width, row_h) for i in range(n)]

    def _widths(self, cell_w: int, metrics: QFontMetrics) -> tuple[int, int]:
        """(value, label) widths in a cell ``cell_w`` wide: the tokens whole where they fit, the bar giving way down
        to an eighth of the cell (a narrow two-column chart in beam mode cut words to five letters when labels had
        half of what the value left)."""
        value_w = metrics.horizontalAdvance("0.000 \u2190") + 4
        widest = max((metrics.horizontalAdvance(piece_label(t)) for t, _ in self._items), default=0) + 10
        return value_w, min(widest, max(40, cell_w - value_w - 8 - max(16, cell_w // 8)))

    def label_text(self, tok: str, cell_w: int, metrics: QFontMetrics | None = None) -> str:
        """A candidate's label as drawn in a cell ``cell_w`` wide (elided in the middle only where it cannot fit)."""
        metrics = metrics or self.fontMetrics()
        label_w = self._widths(cell_w, metrics)[1]
        return metrics.elidedText(piece_label(tok), Qt.TextElideMode.ElideMiddle, label_w - 6)

    def _paint_bar(self, painter: QPainter, cell: QRect, tok: str, p: float) -> None:
        """A candidate in ``cell``: its token right-aligned, its bar, its probability (an arrow on the token taken)."""
        pal, metrics = self.palette(), painter.fontMetrics()
        value_w, label_w = self._widths(cell.width(), metrics)
        bar_w = max(10, cell.width() - label_w - value_w - 8)
        x, y, row_h = cell.left(), cell.top(), cell.height()
        painter.setPen(pal.color(QPalette.ColorRole.WindowText))
        right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
        painter.drawText(QRect(x + 4, y, label_w - 6, row_h), right, self.label_text(tok, cell.width(), metrics))
        chosen = self._is_chosen(tok)
        painter.fillRect(QRect(x + label_w, y + 2, int(bar_w * p), row_h - 3),
                         pal.color(QPalette.ColorRole.Highlight) if chosen else color_at(0.35 + 0.5 * p))
        if tok == self.foil_shown:  # the foil of the contrast shown: a dashed frame around its row
            painter.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 1, Qt.PenStyle.DashLine))
            painter.drawRect(cell.adjusted(1, 0, -2, -1))
            painter.setPen(pal.color(QPalette.ColorRole.WindowText))
        painter.drawText(QRect(x + label_w + bar_w + 4, y, value_w, row_h), Qt.AlignmentFlag.AlignVCenter,
                         f"{p:.3f}" + (" \u2190" if chosen else ""))  # an arrow marks the token taken

    def token_at(self, pos) -> str | None:
        return next((self._items[i][0] for i, r in enumerate(self._rows) if r.contains(pos) and i < len(self._items)),
                    None)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        token = self.token_at(event.position().toPoint())
        if token is not None:
            self.alternative.emit(token)

    def contextMenuEvent(self, event) -> None:  # noqa: N802
        token = self.token_at(event.pos())
        if token is None:
            return
        menu = self.candidate_menu(token)
        menu.exec(event.globalPos())
        menu.deleteLater()

    def candidate_menu(self, token: str) -> QMenu:
        """A candidate's menu: decode on with it (a what-if), or why the step's token and not it (a contrast,
        checked while the map shows it)."""
        menu = QMenu(self)
        menu.addAction(f"Decode on with {token!r} at this step").triggered.connect(
            lambda checked=False, t=token: self.alternative.emit(t))
        why = menu.addAction(f"Why this and not {visible_token(token)!r}?")
        why.setEnabled(not self._is_chosen(token))
        why.setCheckable(True)
        why.setChecked(token == self.foil_shown)
        why.triggered.connect(lambda checked=False, t=token: self.foil.emit(t))
        return menu
