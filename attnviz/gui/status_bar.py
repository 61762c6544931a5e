"""The window's status bar: a message too long for the room left of the permanent widgets (the model's summary) is
drawn elided with "…", its whole text in the tooltip, instead of being cut off mid-word against the label."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt, Slot
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import QStatusBar, QWidget

from attnviz.gui.widgets import guarded_paint

MARGIN = 6  # px between the message and the bar's left edge, and between it and the first permanent widget


class ElidingStatusBar(QStatusBar):
    """``QStatusBar`` whose temporary message is elided to its room; ``currentMessage()`` stays the whole text."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._permanent: list[QWidget] = []
        self.messageChanged.connect(self._on_message_changed)

    def addPermanentWidget(self, widget: QWidget, stretch: int | None = 0) -> None:  # noqa: N802
        self._permanent.append(widget)
        super().addPermanentWidget(widget, stretch or 0)

    def message_room(self) -> QRect:
        """Where the message is drawn: from the left edge to the first visible permanent widget."""
        right = min((w.geometry().left() for w in self._permanent if w.isVisible()), default=self.width())
        return QRect(MARGIN, 0, max(0, right - 2 * MARGIN), self.height())

    def shown_message(self) -> str:
        """The message as drawn: whole, or elided at its end where the room is too narrow."""
        return self.fontMetrics().elidedText(self.currentMessage(), Qt.TextElideMode.ElideRight,
                                             self.message_room().width())

    @Slot(str)
    def _on_message_changed(self, text: str) -> None:
        self.setToolTip(text if text and self.shown_message() != text else "")

    @guarded_paint
    def paintEvent(self, event) -> None:  # noqa: N802
        if not self.currentMessage():
            super().paintEvent(event)
            return
        painter = QPainter(self)
        painter.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        painter.drawText(self.message_room(), Qt.AlignmentFlag.AlignLeading | Qt.AlignmentFlag.AlignVCenter
                         | Qt.TextFlag.TextSingleLine, self.shown_message())
