"""Token strips: source and output tokens as chips, shaded by attention, hoverable, selectable and copyable from
the keyboard; under each output token, when an attribution is shown, a bar of its source share against the target
prefix. Each strip's title leads its first row, and the chips are a line of text high, so that a 15-token sentence
takes three or four rows of a narrow side column. (The top-k chart is ``topk.TopKView``.)"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from PySide6.QtCore import QEvent, QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QPalette,
    QPen,
)
from PySide6.QtWidgets import QMenu, QSizePolicy, QWidget

from attnviz.engine.text.tokenize import piece_text, visible_token
from attnviz.gui.accessible import announce
from attnviz.gui.attention.colormap import color_at
from attnviz.gui.widgets import guarded_paint

ALL = -2  # TokenStrip.selected() after Ctrl+A: every chip
SHARE_BAR = 5  # px: the source-share bar under an output chip
CHIP_PAD, GAP = 4, 2  # px: a chip's height over a line of text; the space between chips and around them


class TokenStrip(QWidget):
    """A wrapped row of tokens. ``hovered(index)`` (-1 on leave); ``clicked(index)``. Shading comes from outside.

    Tab reaches it; Left/Right (Home/End) select a chip and show its attention as hovering does, Enter or Space
    clicks it; Ctrl+A selects every chip, Escape none. Ctrl+C (and the context menu) copy the selected chip's token
    as it is, blank or not (a space pastes as a space), or every token joined by spaces with blanks drawn as glyphs
    (a space token between the separating spaces would vanish and shift every token after it)."""

    hovered = Signal(int)
    clicked = Signal(int)

    def __init__(self, placeholder: str, title: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.title = title  # drawn in bold before the first chip, so the strip needs no line of its own
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.DefaultContextMenu)
        self._placeholder = placeholder
        self._selected = -1  # the chip the keyboard or a click selected; ALL when Ctrl+A selected every one
        self._tokens: list[str] = []
        self._weights: list[float] | None = None
        self._shares: list[float] | None = None  # per chip, the share of its attribution that comes from the source
        self.share_name = ""  # the method the shares are from
        self._current = -1
        self._rects: list[QRect] = []
        self._labels: list[str] = []
        self._room: list[str] = []  # the labels the strip's height is for (``set_tokens``)
        self._roles: list[str] = []  # an LLM prompt's: each token's role (template, instruction, source)
        self._starts: list[bool] = []  # per chip: a subword piece that starts a word (SentencePiece's "▁")
        self._widths: dict[str, int] = {}  # a label's chip width in the strip's font (a long answer lays out often)

    def set_placeholder(self, text: str) -> None:
        self._placeholder = text
        self.update()

    def set_title(self, text: str) -> None:
        self.title = text
        self.updateGeometry()
        self.update()

    def _title_width(self) -> int:
        """The room the title takes before the first chip (0 without a title)."""
        return self._bold().horizontalAdvance(self.title) + 2 * GAP if self.title else 0

    def _bold(self) -> QFontMetrics:
        font = QFont(self.font())
        font.setBold(True)
        return QFontMetrics(font)

    def set_tokens(self, tokens: Sequence[str], current: int = -1, room: Sequence[str] = (),
                   roles: Sequence[str] = ()) -> None:
        """Show ``tokens`` (``current`` marked); the strip keeps the height ``room`` needs (the whole translation
        while playback or scrubbing shows a part of it), so the column under it does not move at every step.
        ``roles`` (an LLM's prompt) mark the chat template's tokens (dashed, italic) and the instruction's (dotted)
        apart from the sentence's own (solid)."""
        self._roles = list(roles) if len(roles) == len(tokens) else []
        kept = self._selected + 1  # the selected chip stays while it and the tokens before it do (playback)
        if list(tokens) != self._tokens and (kept <= 0 or list(tokens[:kept]) != self._tokens[:kept]):
            self._selected = -1
        self._tokens, self._current, self._weights = list(tokens), current, None
        # a space drawn as a glyph, not as nothing; a piece as words are written, its word start a dot (``_paint``)
        pieces = [piece_text(t) for t in self._tokens]
        self._labels = [visible_token(t) for t, _ in pieces]
        self._starts = [start for _, start in pieces]
        self._room = [visible_token(piece_text(t)[0]) for t in room] if len(room) > len(tokens) else self._labels
        self.updateGeometry()
        self.update()
        announce(self)

    def set_weights(self, weights: Iterable[float] | None) -> None:
        """Shade each token by a weight in 0..1, relative to the row's largest (None clears the shading)."""
        self._weights = None if weights is None else [float(w) for w in weights]
        self.update()

    def set_shares(self, shares: Sequence[float] | None, name: str = "") -> None:
        """A bar under each chip: the share of its attribution from the source (the rest: the target prefix)."""
        self._shares, self.share_name = None if shares is None else [float(v) for v in shares], name
        self.updateGeometry()
        self.update()

    def accessible_value(self) -> str:
        """The tokens as a screen reader reads them, with the shading when there is one."""
        if not self._tokens:
            return self._placeholder
        text = " ".join(self._labels)
        if self._roles:
            text += ". The sentence: " + " ".join(t for t, r in zip(self._labels, self._roles) if r == "source") + \
                "; the rest is the chat template (dashed) and the instruction (dotted)"
        if self._shares is not None:
            text += f". Source share ({self.share_name}): " + ", ".join(
                f"{t} {v:.0%}" for t, v in zip(self._labels, self._shares))
        if self._selected == ALL:
            text += ". All selected"
        elif self._selected >= 0:
            text += f". Selected: {self._labels[self._selected]}, token {self._selected + 1} of {len(self._labels)}"
        if self._weights is None:
            return text
        shaded = ", ".join(f"{t} {w:.0%}" for t, w in zip(self._labels, self._weights))
        return f"{text}. Shading, relative to the strongest: {shaded}"

    def tokens(self) -> list[str]:
        return list(self._tokens)

    def selected(self) -> int:
        """The selected chip's index, ``ALL`` after Ctrl+A, or -1."""
        return self._selected

    def select(self, index: int) -> None:
        """Select chip ``index`` (clamped), ``ALL`` or none (-1); a chip shows its attention as hovering it does."""
        if index != ALL:
            index = min(max(index, -1), len(self._tokens) - 1)
        self._selected = index if self._tokens else -1
        self.update()
        announce(self)
        if self._selected >= 0:
            self.hovered.emit(self._selected)

    def copy_text(self, everything: bool = False) -> str:
        """What Copy puts on the clipboard: the selected chip's token, or (``everything``, or nothing but Ctrl+A or
        no chip selected) the visible tokens joined by spaces."""
        if 0 <= self._selected < len(self._tokens) and not everything:
            return self._tokens[self._selected]
        return " ".join(self._labels)

    def copy(self, everything: bool = False) -> None:
        if self._tokens:
            QGuiApplication.clipboard().setText(self.copy_text(everything))

    def _flow(self, labels: Sequence[str] | None = None) -> list[QRect]:
        """The chips' rectangles (of ``labels``, the strip's own by default), wrapped at the strip's width after the
        title: compact (a line of text and a few pixels), so a 15-token sentence takes three or four rows of a
        narrow side column."""
        metrics, first = self.fontMetrics(), GAP + self._title_width()
        x, y, rects = first, GAP, list[QRect]()
        h, bar = metrics.height() + CHIP_PAD, SHARE_BAR + 2 if self._shares is not None else 0
        widths = self._widths
        for tok in self._labels if labels is None else labels:
            w = widths.get(tok)
            if w is None:
                w = widths[tok] = metrics.horizontalAdvance(tok) + 10
            if x + w > self.width() - GAP and x > GAP and rects:
                x, y = GAP, y + h + GAP + bar
            rects.append(QRect(x, y, w, h))
            x += w + GAP
        return rects

    def sizeHint(self) -> QSize:
        rects = self._flow(self._room)
        bar = SHARE_BAR + 2 if self._shares is not None else 0
        line = self.fontMetrics().height() + CHIP_PAD + 2 * GAP
        return QSize(400, (rects[-1].bottom() + GAP + 1 + bar) if rects else line)

    def minimumSizeHint(self) -> QSize:
        return QSize(100, self.sizeHint().height())

    def resizeEvent(self, event) -> None:  # noqa: N802
        self.updateGeometry()

    def changeEvent(self, event) -> None:  # noqa: N802
        if event.type() == QEvent.Type.FontChange:
            self._widths.clear()  # measured in the old font
        super().changeEvent(event)

    @guarded_paint
    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        if self.hasFocus():  # where the keyboard is: a frame around the strip
            painter.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 1, Qt.PenStyle.DashLine))
            painter.drawRect(self.rect().adjusted(0, 0, -1, -1))
        self._rects = self._flow()
        if self.title:
            self._paint_title(painter)
        if not self._tokens:
            painter.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(self.rect().adjusted(GAP + self._title_width(), 0, 0, 0), Qt.AlignmentFlag.AlignVCenter,
                             self._placeholder)
            return
        exposed = event.rect()  # a long answer's strip scrolls: only the chips in view are painted
        for i, (tok, rect) in enumerate(zip(self._labels, self._rects)):
            if not rect.adjusted(-3, -3, 3, SHARE_BAR + 3).intersects(exposed):
                continue
            fill = pal.color(QPalette.ColorRole.AlternateBase)
            text = pal.color(QPalette.ColorRole.Text)
            if self._weights is not None and i < len(self._weights):
                fill = color_at(self._weights[i])
                text = QColor("black") if self._weights[i] > 0.55 else QColor("white")
            painter.setBrush(fill)
            role = self._roles[i] if i < len(self._roles) else "source"
            style = {"template": Qt.PenStyle.DashLine, "instruction": Qt.PenStyle.DotLine}.get(role,
                                                                                               Qt.PenStyle.SolidLine)
            painter.setPen(QPen(QColor(255, 80, 80), 2) if i == self._current
                           else QPen(pal.color(QPalette.ColorRole.Mid) if role == "source"
                                     else pal.color(QPalette.ColorRole.WindowText), 1, style))
            painter.drawRoundedRect(QRectF(rect), 6, 6)
            if self._selected in (i, ALL):  # selected: a highlight ring outside the chip's own border
                painter.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 2))
                painter.setBrush(Qt.BrushStyle.NoBrush)
                painter.drawRoundedRect(QRectF(rect).adjusted(-2, -2, 2, 2), 7, 7)
            painter.setPen(text)
            if role == "template":  # the chat template's own tokens: in italics, not the user's words
                font = QFont(self.font())
                font.setItalic(True)
                painter.setFont(font)
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, tok)
            painter.setFont(self.font())
            if i < len(self._starts) and self._starts[i]:  # a word starts here: a quiet dot, not an underscore
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(pal.color(QPalette.ColorRole.Mid) if self._weights is None else text)
                painter.drawEllipse(QPointF(rect.left() + 3.5, rect.top() + 3.5), 1.3, 1.3)
            if self._shares is not None and i < len(self._shares):
                self._paint_share(painter, rect, self._shares[i])

    def _paint_title(self, painter: QPainter) -> None:
        font = QFont(self.font())
        font.setBold(True)
        painter.save()
        painter.setFont(font)
        painter.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        line = self.fontMetrics().height() + CHIP_PAD
        top = self._rects[0].top() if self._rects else (self.height() - line) // 2
        painter.drawText(QRect(GAP, top, self._title_width(), line), Qt.AlignmentFlag.AlignVCenter, self.title)
        painter.restore()

    def _paint_share(self, painter: QPainter, chip: QRect, share: float) -> None:
        """Under the chip: the source share in the map's bright colour, the target prefix's in grey."""
        bar = QRect(chip.left() + 2, chip.bottom() + 3, chip.width() - 4, SHARE_BAR)
        painter.fillRect(bar, self.palette().color(QPalette.ColorRole.Mid))
        painter.fillRect(QRect(bar.left(), bar.top(), round(bar.width() * min(max(share, 0.0), 1.0)), SHARE_BAR),
                         color_at(0.85))

    def index_at(self, event: QMouseEvent) -> int:
        pos = event.position().toPoint()
        return next((i for i, r in enumerate(self._rects) if r.contains(pos)), -1)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        self.hovered.emit(self.index_at(event))

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        index = self.index_at(event)
        if index >= 0:
            self._selected = index
            self.update()
            if event.button() == Qt.MouseButton.LeftButton:
                self.clicked.emit(index)

    def leaveEvent(self, event) -> None:  # noqa: N802
        self.hovered.emit(-1)

    def event(self, event: QEvent) -> bool:
        # Ctrl+C and Ctrl+A are the strip's while it has focus, not a window shortcut's
        if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent) and (
                event.matches(QKeySequence.StandardKey.Copy) or event.matches(QKeySequence.StandardKey.SelectAll)):
            event.accept()
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802
        if event.matches(QKeySequence.StandardKey.Copy):
            self.copy()
        elif event.matches(QKeySequence.StandardKey.SelectAll):
            self.select(ALL)
        elif (moved := self._moved(event.key())) is not None:
            self.select(moved)
        elif event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space) and self._selected >= 0:
            self.clicked.emit(self._selected)
        elif event.key() == Qt.Key.Key_Escape and self._selected != -1:
            self.select(-1)
            self.hovered.emit(-1)
        else:
            super().keyPressEvent(event)

    def _moved(self, key: int) -> int | None:
        """The chip an arrow, Home or End key selects, or None for another key."""
        last, at = len(self._tokens) - 1, self._selected
        return {Qt.Key.Key_Left: max(at - 1, 0) if at >= 0 else last, Qt.Key.Key_Right: min(at + 1, last),
                Qt.Key.Key_Home: 0, Qt.Key.Key_End: last}.get(Qt.Key(key)) if self._tokens else None

    def focusOutEvent(self, event) -> None:  # noqa: N802
        self.update()  # the focus frame goes
        super().focusOutEvent(event)

    def focusInEvent(self, event) -> None:  # noqa: N802
        self.update()
        super().focusInEvent(event)

    def contextMenuEvent(self, event) -> None:  # noqa: N802
        menu = self.copy_menu()
        menu.exec(event.globalPos())
        menu.deleteLater()

    def copy_menu(self) -> QMenu:
        """Copy (the selected chip's token) and Copy all (every token)."""
        menu = QMenu(self)
        chip = self._selected >= 0 and self._selected < len(self._labels)
        copy = menu.addAction(f"&Copy {self._labels[self._selected]!r}" if chip else "&Copy")
        copy.setEnabled(chip)
        copy.triggered.connect(lambda checked=False: self.copy())
        every = menu.addAction("Copy &all")
        every.setEnabled(bool(self._tokens))
        every.triggered.connect(lambda checked=False: self.copy(everything=True))
        return menu
