"""Token strips (source and output tokens as chips, shaded by attention, hoverable, selectable and copyable from
the keyboard; under each output token, when an attribution is shown, a bar of its source share against the target
prefix) and the top-k chart."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from PySide6.QtCore import QEvent, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QGuiApplication, QKeyEvent, QKeySequence, QMouseEvent, QPainter, QPalette, QPen
from PySide6.QtWidgets import QMenu, QSizePolicy, QWidget

from attnviz.engine.text.tokenize import visible_token
from attnviz.gui.accessible import announce
from attnviz.gui.attention.colormap import color_at

ALL = -2  # TokenStrip.selected() after Ctrl+A: every chip
SHARE_BAR = 5  # px: the source-share bar under an output chip
ROW_GAP = 1  # px between the top-k chart's rows
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

    def set_tokens(self, tokens: Sequence[str], current: int = -1) -> None:
        kept = self._selected + 1  # the selected chip stays while it and the tokens before it do (playback)
        if list(tokens) != self._tokens and (kept <= 0 or list(tokens[:kept]) != self._tokens[:kept]):
            self._selected = -1
        self._tokens, self._current, self._weights = list(tokens), current, None
        self._labels = [visible_token(t) for t in self._tokens]  # a space drawn as a glyph, not as nothing
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

    def _flow(self) -> list[QRect]:
        """The chips' rectangles, wrapped at the strip's width after the title: compact (a line of text and a few
        pixels), so a 15-token sentence takes three or four rows of a narrow side column."""
        metrics, first = self.fontMetrics(), GAP + self._title_width()
        x, y, rects = first, GAP, []
        h, bar = metrics.height() + CHIP_PAD, SHARE_BAR + 2 if self._shares is not None else 0
        for tok in self._labels:
            w = metrics.horizontalAdvance(tok) + 10
            if x + w > self.width() - GAP and x > GAP and rects:
                x, y = GAP, y + h + GAP + bar
            rects.append(QRect(x, y, w, h))
            x += w + GAP
        return rects

    def sizeHint(self) -> QSize:
        rects = self._flow()
        bar = SHARE_BAR + 2 if self._shares is not None else 0
        line = self.fontMetrics().height() + CHIP_PAD + 2 * GAP
        return QSize(400, (rects[-1].bottom() + GAP + 1 + bar) if rects else line)

    def minimumSizeHint(self) -> QSize:
        return QSize(100, self.sizeHint().height())

    def resizeEvent(self, event) -> None:  # noqa: N802
        self.updateGeometry()

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
            if self._selected in (i, ALL):  # selected: a highlight ring outside the chip's own border
                painter.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 2))
                painter.setBrush(Qt.BrushStyle.NoBrush)
                painter.drawRoundedRect(QRectF(rect).adjusted(-2, -2, 2, 2), 7, 7)
            painter.setPen(text)
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, tok)
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

    def _paint_bar(self, painter: QPainter, cell: QRect, tok: str, p: float) -> None:
        """A candidate in ``cell``: its token right-aligned, its bar, its probability (an arrow on the token taken)."""
        pal, metrics = self.palette(), painter.fontMetrics()
        value_w = metrics.horizontalAdvance("0.000 \u2190") + 4
        widest = max(metrics.horizontalAdvance(visible_token(t)) for t, _ in self._items) + 10
        label_w = min(90, widest, max(40, (cell.width() - value_w) // 2))  # the tokens whole where they fit
        bar_w = max(10, cell.width() - label_w - value_w - 8)
        x, y, row_h = cell.left(), cell.top(), cell.height()
        painter.setPen(pal.color(QPalette.ColorRole.WindowText))
        painter.drawText(QRect(x + 4, y, label_w - 6, row_h), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                         metrics.elidedText(visible_token(tok), Qt.TextElideMode.ElideMiddle, label_w - 6))
        chosen = self._is_chosen(tok)
        painter.fillRect(QRect(x + label_w, y + 2, int(bar_w * p), row_h - 3),
                         pal.color(QPalette.ColorRole.Highlight) if chosen else color_at(0.35 + 0.5 * p))
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
        menu = QMenu(self)
        menu.addAction(f"Decode on with {token!r} at this step").triggered.connect(
            lambda checked=False, t=token: self.alternative.emit(t))
        why = menu.addAction(f"Why this and not {visible_token(token)!r}?")
        why.setEnabled(not self._is_chosen(token))
        why.triggered.connect(lambda checked=False, t=token: self.foil.emit(t))
        menu.exec(event.globalPos())
