"""Small helpers shared by the tabs."""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtWidgets import QWidget

W = TypeVar("W", bound=QWidget)


def named(widget: W, name: str, accessible: str, tip: str = "") -> W:
    """Give a widget its object name (tests, stylesheet), accessible name (screen readers) and tooltip."""
    widget.setObjectName(name)
    widget.setAccessibleName(accessible)
    widget.setToolTip(tip or accessible)
    return widget
