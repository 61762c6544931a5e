"""Small helpers shared by the tabs."""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtWidgets import QFrame, QScrollArea, QWidget

W = TypeVar("W", bound=QWidget)


def named(widget: W, name: str, accessible: str, tip: str = "") -> W:
    """Give a widget its object name (tests, stylesheet), accessible name (screen readers) and tooltip."""
    widget.setObjectName(name)
    widget.setAccessibleName(accessible)
    widget.setToolTip(tip or accessible)
    return widget


def scrolled(widget: QWidget, name: str = "") -> QScrollArea:
    """``widget`` in a frameless, resizable scroll area: it keeps its minimum size and scrolls instead of forcing
    the window taller than a laptop screen (the Train tab once needed 999 px) or overlapping its neighbours."""
    area = QScrollArea()
    area.setObjectName(name or f"{widget.objectName()}Scroll")
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setWidget(widget)
    return area
