"""The finished translation as text, and the translation's warnings.

The token strips are pictures: nothing in them can be selected, copied or read aloud. ``TranslationText`` shows
the detokenized sentence in a read-only line edit (selectable, read by screen readers as its value) with a Copy
button, and under it the lines other parts add about the sentence (its suspect-translation score).
``WarningList`` shows every warning of a translation, one per line (a long input used to hide "62 tokens were
dropped" behind the unknown-word warning), until the model or the sentence changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from attnviz.gui.widgets import named


class TranslationText(QWidget):
    """Read-only, selectable text of the translation so far, and a Copy button."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.edit = named(QLineEdit(), "translationText", "Translation text",
                          "The translation as text: select it, or press Copy")
        self.edit.setReadOnly(True)
        self.copy_button = named(QPushButton("&Copy"), "copyTranslationButton", "Copy translation",
                                 "Copy the translation to the clipboard (Ctrl+Shift+C)")
        self.copy_button.clicked.connect(self.copy)
        self.column = QVBoxLayout(self)  # the text and its button, then lines about the text (add_line)
        self.column.setContentsMargins(0, 0, 0, 0)
        self.column.setSpacing(2)
        row = QHBoxLayout()
        row.addWidget(self.edit, 1)
        row.addWidget(self.copy_button)
        self.column.addLayout(row)
        self.set_text("", finished=False)

    def add_line(self, widget: QWidget) -> None:
        """Show ``widget`` under the text (the suspect-translation score)."""
        self.column.addWidget(widget)

    def set_text(self, text: str, finished: bool) -> None:
        """Show ``text``; while decoding (``finished`` False) it is marked as not final yet."""
        self.edit.setText(text)
        self.edit.setCursorPosition(0)
        self.edit.setAccessibleDescription("" if finished or not text else "still decoding")
        self.copy_button.setEnabled(bool(text))

    def text(self) -> str:
        return self.edit.text()

    def set_placeholder(self, text: str) -> None:
        self.edit.setPlaceholderText(text)

    @Slot()
    def copy(self) -> None:
        if self.edit.text():
            QGuiApplication.clipboard().setText(self.edit.text())


class WarningList(QLabel):
    """Every warning of the current translation, one per line; hidden when there are none."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("messageLabel")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._items: list[str] = []
        self.hide()

    def set_messages(self, messages: Sequence[str]) -> None:
        self._items = [m for m in messages if m]
        prefix = "\u26a0 " if len(self._items) > 1 else ""
        self.setText("\n".join(prefix + m for m in self._items))
        self.setAccessibleName(f"{len(self._items)} warning(s)" if self._items else "No warnings")
        self.setVisible(bool(self._items))

    def add(self, message: str) -> None:
        if message and message not in self._items:
            self.set_messages([*self._items, message])

    def messages(self) -> list[str]:
        return list(self._items)
