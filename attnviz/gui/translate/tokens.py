"""Token strips (source and output tokens as chips, shaded by attention, hoverable) and the top-k chart."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from PySide6.QtCore import QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPalette, QPen
from PySide6.QtWidgets import QMenu, QSizePolicy, QWidget

from attnviz.engine.text.tokenize import visible_token
from attnviz.gui.accessible import announce
from attnviz.gui.attention.colormap import color_at


class TokenStrip(QWidget):
    """A wrapped row of tokens. ``hovered(index)`` (-1 on leave); ``clicked(index)``. Shading comes from outside."""

    hovered = Signal(int)
    clicked = Signal(int)

    def __init__(self, placeholder: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self._placeholder = placeholder
        self._tokens: list[str] = []
        self._weights: list[float] | None = None
        self._current = -1
        self._rects: list[QRect] = []
        self._labels: list[str] = []

    def set_placeholder(self, text: str) -> None:
        self._placeholder = text
        self.update()

    def set_tokens(self, tokens: Sequence[str], current: int = -1) -> None:
        self._tokens, self._current, self._weights = list(tokens), current, None
        self._labels = [visible_token(t) for t in self._tokens]  # a space drawn as a glyph, not as nothing
        self.updateGeometry()
        self.update()
        announce(self)

    def set_weights(self, weights: Iterable[float] | None) -> None:
        """Shade each token by a weight in 0..1, relative to the row's largest (None clears the shading)."""
        self._weights = None if weights is None else [float(w) for w in weights]
        self.update()

    def accessible_value(self) -> str:
        """The tokens as a screen reader reads them, with the shading when there is one."""
        if not self._tokens:
            return self._placeholder
        if self._weights is None:
            return " ".join(self._labels)
        shaded = ", ".join(f"{t} {w:.0%}" for t, w in zip(self._labels, self._weights))
        return f"{' '.join(self._labels)}. Shading, relative to the strongest: {shaded}"

    def tokens(self) -> list[str]:
        return list(self._tokens)

    def _flow(self) -> list[QRect]:
        metrics, x, y, rects = self.fontMetrics(), 4, 4, []
        h = metrics.height() + 8
        for tok in self._labels:
            w = metrics.horizontalAdvance(tok) + 14
            if x + w > self.width() - 4 and x > 4:
                x, y = 4, y + h + 4
            rects.append(QRect(x, y, w, h))
            x += w + 4
        return rects

    def sizeHint(self) -> QSize:
        rects = self._flow()
        return QSize(400, (rects[-1].bottom() + 6) if rects else self.fontMetrics().height() + 16)

    def minimumSizeHint(self) -> QSize:
        return QSize(100, self.sizeHint().height())

    def resizeEvent(self, event) -> None:  # noqa: N802
        self.updateGeometry()

    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        if not self._tokens:
            painter.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(self.rect().adjusted(6, 0, 0, 0), Qt.AlignmentFlag.AlignVCenter, self._placeholder)
            return
        self._rects = self._flow()
        for i, (tok, rect) in enumerate(zip(self._labels, self._rects)):
            fill = pal.color(QPalette.ColorRole.AlternateBase)
            text = pal.color(QPalette.ColorRole.Text)
            if self._weights is not None and i < len(self._weights):
                fill = color_at(self._weights[i])
                text = QColor("black") if self._weights[i] > 0.55 else QColor("white")
            painter.setBrush(fill)
            painter.setPen(QPen(QColor(255, 80, 80), 2) if i == self._current
                           else QPen(pal.color(QPalette.ColorRole.Mid)))
            painter.drawRoundedRect(QRectF(rect), 6, 6)
            painter.setPen(text)
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, tok)

    def index_at(self, event: QMouseEvent) -> int:
        pos = event.position().toPoint()
        return next((i for i, r in enumerate(self._rects) if r.contains(pos)), -1)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        self.hovered.emit(self.index_at(event))

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        index = self.index_at(event)
        if index >= 0:
            self.clicked.emit(index)

    def leaveEvent(self, event) -> None:  # noqa: N802
        self.hovered.emit(-1)


class TopKView(QWidget):
    """The best candidates of one step as horizontal bars with exact probabilities; the chosen one first.

    Double-clicking a candidate (or "Decode on with ..." in its context menu) emits ``alternative(token)``: a what-if
    that takes it at this step instead."""

    alternative = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("topkView")
        self.setAccessibleName("Best next-token candidates")
        self._items: list[tuple[str, float]] = []
        self._entropy: float | None = None
        self._chosen: tuple[str, float] | None = None
        self.placeholder = "The likeliest next tokens appear here"
        self.setMinimumSize(200, 120)
        self._rows: list[QRect] = []

    def set_candidates(self, items: Sequence[tuple[str, float]], entropy: float | None,
                       chosen: tuple[str, float] | None = None) -> None:
        """The top-k ``items`` (token, probability) and the token the step took, which sampling may draw from
        further down (or from outside the top k)."""
        self._items, self._entropy = list(items), entropy
        self._chosen = chosen if chosen is not None else (self._items[0] if self._items else None)
        self.setToolTip("\n".join(f"{visible_token(t)}: {p:.4f}" + (" (chosen)" if self._is_chosen(t) else "")
                                  for t, p in self._items) + ("\nDouble-click one to decode on with it instead"
                                                              if self._items else ""))
        self.update()
        announce(self)

    def _is_chosen(self, token: str) -> bool:
        return self._chosen is not None and token == self._chosen[0]

    def accessible_value(self) -> str:
        if not self._items:
            return self.placeholder
        chosen = f"Chosen: {visible_token(self._chosen[0])} ({self._chosen[1]:.3f}). " if self._chosen else ""
        return chosen + "Candidates: " + ", ".join(f"{visible_token(t)} {p:.3f}" for t, p in self._items)

    def sizeHint(self) -> QSize:
        """As tall as its content: a line of title and a line per candidate (ten before the first step)."""
        line = self.fontMetrics().height()
        return QSize(260, line + 4 + max(len(self._items), 10) * (line + 2))

    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        pal = self.palette()
        painter.setPen(pal.color(QPalette.ColorRole.WindowText))
        if not self._items:
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.placeholder)
            return
        lines = [f"Top {len(self._items)} candidates"]
        if self._entropy is not None:
            lines.append(f"entropy {self._entropy:.3f} nats")
        if self._chosen is not None and not any(self._is_chosen(t) for t, _ in self._items):
            drawn = visible_token(self._chosen[0])
            lines.append(f"drawn: {drawn} ({self._chosen[1]:.4f}), not in the top {len(self._items)}")
        metrics = painter.fontMetrics()
        if metrics.horizontalAdvance(" · ".join(lines)) <= self.width() - 8:
            lines = [" · ".join(lines)]  # wide enough: one line leaves more room for the bars
        line_h = metrics.height()
        for n, text in enumerate(lines):  # a line each rather than one clipped line
            painter.drawText(QRect(4, n * line_h, self.width() - 8, line_h), Qt.AlignmentFlag.AlignLeft,
                             metrics.elidedText(text, Qt.TextElideMode.ElideRight, self.width() - 8))
        top = len(lines) * line_h + 2
        row_h = max(14, (self.height() - top - 2) // len(self._items))
        label_w, value_w = 90, 56
        bar_w = max(10, self.width() - label_w - value_w - 12)
        self._rows = [QRect(0, top + i * row_h, self.width(), row_h) for i in range(len(self._items))]
        for i, (tok, p) in enumerate(self._items):
            y = top + i * row_h
            painter.setPen(pal.color(QPalette.ColorRole.WindowText))
            painter.drawText(QRect(4, y, label_w - 6, row_h),
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, visible_token(tok))
            chosen = self._is_chosen(tok)
            painter.fillRect(QRect(label_w, y + 2, int(bar_w * p), row_h - 4),
                             pal.color(QPalette.ColorRole.Highlight) if chosen else color_at(0.35 + 0.5 * p))
            painter.drawText(QRect(label_w + bar_w + 4, y, value_w, row_h), Qt.AlignmentFlag.AlignVCenter,
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
        menu = QMenu(self)
        menu.addAction(f"Decode on with {token!r} at this step").triggered.connect(
            lambda checked=False, t=token: self.alternative.emit(t))
        menu.exec(event.globalPos())
