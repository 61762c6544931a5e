"""The rows of selectors over an attention map: all on one row when it fits whole; else the scale and merge choices
go to a second row, then the selectors added before the kind (the Quantity choice), so that no selector is cut
("Cross-attenti", "Mean of |" at 1024 px); and when those two groups do not fit one row together (the Quantity
choice with activation patching's Corrupt field beside it), the scale and merge choices take a third row. A group
that changes its width (a field shown or hidden) arranges the rows again.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QHBoxLayout, QWidget


class SelectorRows(QObject):
    """``first`` is the selectors' own row (the kind, layer and head); ``second`` and ``third`` go under it."""

    def __init__(self, first: QHBoxLayout, lead: QWidget, display: QWidget, head: QWidget, parent: QWidget):
        super().__init__(parent)
        self.first, self.lead, self.display, self.head, self.owner = first, lead, display, head, parent
        self.second = QHBoxLayout()  # both moved up by the first resize where the row fits them whole: a first
        self.second.addWidget(lead)  # row too wide before the window is laid out would widen it
        self.second.addWidget(display)
        self.second.addStretch(1)
        self.third = QHBoxLayout()
        self.third.addStretch(1)
        self._again = QTimer(self)
        self._again.setSingleShot(True)
        self._again.setInterval(0)
        self._again.timeout.connect(self._on_again_timeout)
        for box in (lead, display):
            box.installEventFilter(self)

    def wrap(self, width: int) -> None:
        """Arrange the groups for a panel ``width`` px wide (nothing moves when they already sit right)."""
        first, space = self.first, self.first.spacing()
        movable = (self.lead, self.display)  # the first stays up longest
        used = first.sizeHint().width() - sum(w.sizeHint().width() + space for w in movable if first.indexOf(w) >= 0)
        up = []
        for box in movable:
            used += box.sizeHint().width() + space
            if used > width:
                break
            up.append(box)
        down = [box for box in movable if box not in up]
        together = sum(box.sizeHint().width() + space for box in down) <= width
        rows = {box: first if box in up else self.second if together or box is down[0] else self.third
                for box in movable}
        if all(row.indexOf(box) >= 0 for box, row in rows.items()):
            return
        for box in movable:
            for row in (first, self.second, self.third):
                row.removeWidget(box)
        for box, row in rows.items():  # the lead group first in its row; the display group after the head or the lead
            after = self.head if row is first else self.lead if rows[self.lead] is row else None
            row.insertWidget(0 if after is None else row.indexOf(after) + 1, box)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.LayoutRequest:
            self._again.start()  # a group's width changed (a field shown or hidden)
        return False

    def _on_again_timeout(self) -> None:
        self.wrap(self.owner.width())
