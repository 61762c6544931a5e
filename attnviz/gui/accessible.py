"""Screen-reader text for the widgets that paint themselves (token strips, the heatmap, the top-k chart).

Qt gives a custom-painted QWidget an accessible interface with a name but no value, so a screen reader announced
"Output tokens" and nothing of the translation. A widget that defines ``accessible_value()`` gets, through the
factory installed here, an interface whose Value (and Description) is that text; ``announce`` tells assistive
technology when it changed.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtGui import QAccessible, QAccessibleValueChangeEvent
from PySide6.QtWidgets import QAccessibleWidget, QWidget

_interfaces: dict[int, QAccessibleWidget] = {}  # Python owners of the interfaces, so they are not collected early
_installed = False


class _TextInterface(QAccessibleWidget):
    def __init__(self, widget: QWidget):
        super().__init__(widget, getattr(widget, "accessible_role", QAccessible.Role.StaticText))
        self._widget = widget

    def text(self, kind: QAccessible.Text) -> str:
        if kind in (QAccessible.Text.Value, QAccessible.Text.Description):
            value = _value(self._widget)
            if kind == QAccessible.Text.Value or value:
                return value
        return super().text(kind)


def _value(widget: QWidget) -> str:
    """The text of a widget's ``accessible_value()`` (a method the painting widgets define, not a QWidget one)."""
    value = getattr(widget, "accessible_value", None)
    return value() if callable(value) else ""


def _factory(key: str, obj: QObject) -> QAccessibleWidget | None:
    if isinstance(obj, QWidget) and callable(getattr(obj, "accessible_value", None)):
        interface = _TextInterface(obj)
        owner = id(obj)
        _interfaces[owner] = interface
        obj.destroyed.connect(lambda *_: _interfaces.pop(owner, None))
        return interface
    return None


def install() -> None:
    """Install the factory once per process (harmless to call again)."""
    global _installed
    if not _installed:
        QAccessible.installFactory(_factory)
        _installed = True


def value_of(widget: QWidget) -> str:
    """What a screen reader reads as ``widget``'s value."""
    interface = QAccessible.queryAccessibleInterface(widget)
    return interface.text(QAccessible.Text.Value) if interface is not None else ""


def announce(widget: QWidget) -> None:
    """Tell assistive technology that ``widget``'s value changed (skipped when none is listening)."""
    if QAccessible.isActive():
        QAccessible.updateAccessibility(QAccessibleValueChangeEvent(widget, _value(widget)))
