"""Small helpers shared by the tabs: naming a widget, scrolling one, a row of labelled controls, a chosen file's
name on a button, reading a typed setting back, and the index types of the table models."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias, TypeVar

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSettings, Qt
from PySide6.QtWidgets import QAbstractButton, QBoxLayout, QFrame, QLabel, QScrollArea, QWidget

W = TypeVar("W", bound=QWidget)
V = TypeVar("V", bool, int, float, str)

ModelIndex: TypeAlias = QModelIndex | QPersistentModelIndex  # what Qt hands an item model's methods
NO_PARENT = QModelIndex()  # a table's rows have no parent: the invalid index, made once as a shared default
FILE_NAME_WIDTH = 160  # px a chosen file's name may take on a button; longer ones are cut in the middle


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


def add_labelled(row: QBoxLayout, controls: Iterable[tuple[str, QWidget]], stretch: int = 0) -> None:
    """Add each control to ``row`` after a label whose mnemonic (``&`` in its text) moves the focus to it."""
    for text, widget in controls:
        label = QLabel(text)
        label.setBuddy(widget)
        row.addWidget(label)
        row.addWidget(widget, stretch)


def stored(settings: QSettings, key: str, default: V) -> V:
    """The setting ``key`` as the type of ``default`` (``default`` when it is missing or does not convert)."""
    value = settings.value(key, default, type=type(default))
    return value if isinstance(value, type(default)) else default


def show_file(button: QAbstractButton, prefix: str, path: str | None, empty: str, tip: str) -> None:
    """``button`` names the chosen ``path`` after ``prefix`` (its mnemonic), cut in the middle to FILE_NAME_WIDTH
    so a long name never widens the window past a laptop screen; the tooltip has the whole path. No path: ``empty``.
    """
    if not path:
        button.setText(empty)
        button.setToolTip(tip)
        return
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    shown = button.fontMetrics().elidedText(name, Qt.TextElideMode.ElideMiddle, FILE_NAME_WIDTH)
    button.setText(prefix + shown.replace("&", "&&"))  # a "&" of the name is not a mnemonic
    button.setToolTip(f"{path}\n{tip}")
