"""Keyboard access: who owns which Alt+letter mnemonic and which shortcut, checked for clashes, and listed for Help.

A mnemonic bound twice makes Qt cycle focus between the owners instead of acting, and an ambiguous shortcut does
nothing, so Alt+T once focused the Train tab's Stop button and the next Space stopped a run. ``mnemonic_owners``
walks what is reachable at once (the menu bar, the tab bars, every widget of the shown tab pages, including
hidden ones that may appear, such as Download data) and ``clashes`` names every letter claimed twice, ``unmarked``
every control that has none; a test walks the window in each of its states. ``SentenceEdit`` lets the window's
shortcuts (Ctrl+E, Ctrl+Home, Ctrl+End...) through while a line edit has focus, and ``ShortcutsDialog`` lists every
shortcut of the window.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractButton,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QGroupBox,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMenu,
    QPushButton,
    QRadioButton,
    QStackedWidget,
    QTabBar,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

_MNEMONIC = re.compile(r"(?<!&)&([^&\s])")


def mnemonic(text: str) -> str | None:
    """The lower-case letter that ``&`` marks in ``text`` (``&&`` is a literal ampersand), or None."""
    found = _MNEMONIC.search((text or "").replace("&&", ""))
    return found.group(1).lower() if found else None


def _owned(widget: QWidget) -> list[tuple[str, str]]:
    """(text, kind) of each mnemonic-bearing label that ``widget`` itself shows."""
    if isinstance(widget, QAbstractButton):
        return [(widget.text(), "button")]
    if isinstance(widget, QLabel) and widget.buddy() is not None:
        return [(widget.text(), "label")]
    if isinstance(widget, QGroupBox):
        return [(widget.title(), "group")]
    if isinstance(widget, QTabBar):
        return [(widget.tabText(i), "tab") for i in range(widget.count()) if widget.isTabVisible(i)]
    return []


def _reachable(root: QWidget):
    """``root`` and its descendants, entering only the current page of each stacked widget (tab pages)."""
    yield root
    children = [root.currentWidget()] if isinstance(root, QStackedWidget) else root.children()
    for child in children:
        if isinstance(child, QWidget) and not isinstance(child, QMenu) and not child.isWindow():
            yield from _reachable(child)


def mnemonic_owners(window: QWidget) -> dict[str, list[str]]:
    """Letter -> descriptions of everything that claims Alt+letter in ``window``'s current state."""
    owners: dict[str, list[str]] = defaultdict(list)
    if isinstance(window, QMainWindow):
        for action in window.menuBar().actions():
            if action.isVisible() and (letter := mnemonic(action.text())):
                owners[letter].append(f"menu {action.text()!r}")
    for widget in _reachable(window):
        for text, kind in _owned(widget):
            if letter := mnemonic(text):
                owners[letter].append(f"{kind} {text!r} ({widget.objectName() or type(widget).__name__})")
    return dict(owners)


def unmarked(window: QWidget) -> list[str]:
    """The push buttons, check boxes, radio buttons and labels with a buddy reachable in ``window``'s current state
    whose text marks no Alt+letter (``text (object name)`` each): the README promises every control one."""
    found = []
    for widget in _reachable(window):
        if isinstance(widget, (QPushButton, QCheckBox, QRadioButton)) or (
                isinstance(widget, QLabel) and widget.buddy() is not None):
            if widget.text() and not mnemonic(widget.text()):
                found.append(f"{widget.text()} ({widget.objectName() or type(widget).__name__})")
    return found


def clashes(window: QWidget) -> dict[str, list[str]]:
    """The letters claimed more than once, with their owners (empty when every mnemonic is unique)."""
    return {k: v for k, v in mnemonic_owners(window).items() if len(v) > 1}


def window_actions(window: QWidget) -> list[QAction]:
    """Every action with a shortcut reachable from ``window`` (menus, sub-menus and widgets)."""
    seen, found = set(), []
    for action in window.findChildren(QAction):
        if not action.shortcut().isEmpty() and id(action) not in seen:
            seen.add(id(action))
            found.append(action)
    return found


def shortcut_clashes(window: QWidget) -> dict[str, list[str]]:
    """Key sequences bound to more than one action of ``window``."""
    owners: dict[str, list[str]] = defaultdict(list)
    for action in window_actions(window):
        for seq in action.shortcuts():
            owners[seq.toString(QKeySequence.SequenceFormat.PortableText)].append(action.text().replace("&", ""))
    return {k: v for k, v in owners.items() if len(v) > 1}


def shortcut_rows(window: QWidget) -> list[tuple[str, str]]:
    """(keys, what they do) for every shortcut of ``window``, in menu order, for the Help dialog."""
    rows = []
    for action in window_actions(window):
        keys = ", ".join(s.toString(QKeySequence.SequenceFormat.NativeText) for s in action.shortcuts())
        rows.append((keys, action.text().replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip(".")))
    return rows


# Keys and gestures inside views (no menu action carries them), listed in the Help dialog after the shortcuts.
VIEW_KEYS = (
    ("Arrow keys, Enter", "Search tree: move between nodes; show that hypothesis everywhere"),
    ("Arrow keys, Enter", "Head grid: move between heads; open the head in the large view"),
    ("Space, Shift+Space", "Head grid: switch the head off or on; switch its whole layer"),
    ("Ctrl+click, Ctrl+Shift+click", "Head grid: switch a head off or on; its whole layer (or Ctrl+click a layer's "
                                     "label)"),
    ("Arrow keys", "Heatmap: move between cells; the exact weight is read out"),
    ("Ctrl+wheel", "Heatmap: zoom"),
    ("Double-click", "Top-k chart: decode on with that candidate instead (what-if; also in its context menu)"),
    ("Arrow keys, Enter, Ctrl+A", "Token strips: select a token and show its attention; go to it; select all"),
    ("Ctrl+C", "Token strips: copy the selected token, or all; tables: copy the selected rows with the titles"),
)


class ShortcutsDialog(QDialog):
    """Help > Keyboard shortcuts: every key of the window's actions, the keys inside views, and how mnemonics
    work."""

    def __init__(self, window: QWidget, copyable: Callable[[QTableWidget], object] | None = None):
        """``copyable`` makes the table's rows copy as the window's other tables do (a helper of a sibling module
        of the shell, so the window hands it in)."""
        super().__init__(window)
        self.setWindowTitle("Keyboard shortcuts")
        rows = shortcut_rows(window) + list(VIEW_KEYS)
        self.table = QTableWidget(len(rows), 2, self)
        self.table.setObjectName("shortcutsTable")
        self.table.setAccessibleName("Keyboard shortcuts")
        self.table.setHorizontalHeaderLabels(["Keys", "Action"])
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)  # wrapped rows
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        if copyable is not None:
            copyable(self.table)
        for row, (keys, text) in enumerate(rows):
            self.table.setItem(row, 0, QTableWidgetItem(keys))
            self.table.setItem(row, 1, QTableWidgetItem(text))
        note = QLabel("Alt plus an underlined letter moves to that control, tab or menu; every letter has one owner. "
                      "The shortcuts above also work while the sentence field has focus.")
        note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table, 1)
        layout.addWidget(note)
        layout.addWidget(buttons)
        self.resize(660, 600)


def window_keys(widget: QWidget) -> set[int]:
    """The combined key codes (key | modifiers) of every single-key shortcut of ``widget``'s window."""
    keys = set()
    for action in window_actions(widget.window()):
        for seq in action.shortcuts():
            if seq.count() == 1:
                keys.add(seq[0].toCombined())  # type: ignore[index]  # PySide6's stub omits operator[] (__getitem__)
    return keys


class SentenceEdit(QLineEdit):
    """A line edit that leaves the window's own shortcuts to the window.

    QLineEdit claims Ctrl+E (end of line on X11), Ctrl+Home and Ctrl+End through ShortcutOverride, so the menu
    actions bound to them never fired while the sentence had focus; typing and the usual editing keys still work.
    """

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent):
            combined = event.keyCombination().toCombined()
            if combined in window_keys(self) and not _is_text_key(event):
                event.ignore()  # not overridden: the window's shortcut runs
                return False
        return super().event(event)


def _is_text_key(event: QKeyEvent) -> bool:
    """Keys that type or edit text here and must stay the edit's even if an action were bound to them."""
    mods = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
    plain = mods in (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.ShiftModifier)
    return plain and (bool(event.text().strip()) or event.key() in (Qt.Key.Key_Home, Qt.Key.Key_End,
                                                                  Qt.Key.Key_Left, Qt.Key.Key_Right,
                                                                  Qt.Key.Key_Backspace, Qt.Key.Key_Delete))
