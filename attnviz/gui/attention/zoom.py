"""The heatmap's zoom controls: zoom in / out / fit as actions (Ctrl++, Ctrl+-, Ctrl+0) on their owner, shown as
tool buttons beside the selectors."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QToolButton, QWidget


def zoom_buttons(owner: QWidget, zoom_in: Callable[[], None], zoom_out: Callable[[], None],
                 fit: Callable[[], None]) -> list[QToolButton]:
    """The three buttons, their actions added to ``owner`` (so the shortcuts work wherever it has focus)."""
    buttons = []
    for text, short, keys, tip, slot in (
            ("Zoom out", "\u2212", QKeySequence.StandardKey.ZoomOut, "Smaller cells (Ctrl+-, or Ctrl+wheel)", zoom_out),
            ("Zoom in", "+", QKeySequence.StandardKey.ZoomIn, "Larger cells: every label legible; scroll to see "
             "the rest (Ctrl++, or Ctrl+wheel)", zoom_in),
            ("Fit", "Fit", "Ctrl+0", "Fit the whole map in the view; labels thin out when cells are small (Ctrl+0)",
             fit)):
        action = QAction(text, owner)
        action.setShortcut(QKeySequence(keys))
        action.setToolTip(tip)
        action.triggered.connect(slot)
        owner.addAction(action)
        button = QToolButton()
        button.setDefaultAction(action)
        button.setObjectName(f"zoom{text.split()[-1].capitalize()}Button")
        button.setAccessibleName(text)
        button.setText(short)  # a sign on the button, the words in the action (menus, tooltip, screen reader)
        buttons.append(button)
    return buttons
