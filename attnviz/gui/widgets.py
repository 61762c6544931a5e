"""Small helpers shared by the tabs: a paint that cannot crash the app, naming a widget, scrolling one, a row of
labelled controls, a chosen file's name on a button, reading a typed setting back, the index types of the table
models, and copying a table's rows as a spreadsheet expects."""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any, TypeAlias, TypeVar

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, QPoint, QSettings, Qt
from PySide6.QtGui import QGuiApplication, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QBoxLayout,
    QFrame,
    QLabel,
    QMenu,
    QScrollArea,
    QTableView,
    QWidget,
)

W = TypeVar("W", bound=QWidget)
V = TypeVar("V", bool, int, float, str)
ItemView = TypeVar("ItemView", bound=QAbstractItemView)
Table = TypeVar("Table", bound=QTableView)

ModelIndex: TypeAlias = QModelIndex | QPersistentModelIndex  # what Qt hands an item model's methods
NO_PARENT = QModelIndex()  # a table's rows have no parent: the invalid index, made once as a shared default
COMPACT_PAD = 6  # px a compact table row adds to a line of text
FILE_NAME_WIDTH = 160  # px a chosen file's name may take on a button; longer ones are cut in the middle


_PAINT_FAULTS: set[str] = set()  # the widget classes whose drawing failed once (said once each)


def guarded_paint(paint: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    """A widget's ``paintEvent`` that cannot take the app down: PySide6 aborts the process when an exception leaves a
    method Qt calls (shiboken crashes while printing it), so a drawing fault (a value nobody foresaw) is printed once
    per widget class and the widget draws nothing more this time."""

    @functools.wraps(paint)
    def safe(self, event) -> None:
        try:
            paint(self, event)
        except Exception:  # noqa: BLE001 - any drawing fault: the window and the user's work stay
            name = type(self).__name__
            if name not in _PAINT_FAULTS:
                _PAINT_FAULTS.add(name)
                print(f"attnviz: drawing {name} failed (shown once; please report it):", file=sys.stderr)
                traceback.print_exc()

    return safe


def named(widget: W, name: str, accessible: str, tip: str = "") -> W:
    """Give a widget its object name (tests, stylesheet), accessible name (screen readers) and tooltip."""
    widget.setObjectName(name)
    widget.setAccessibleName(accessible)
    widget.setToolTip(tip or accessible)
    return widget


def compact_rows(table: Table) -> Table:
    """Rows a line of text and a few pixels high (the style's default is about twice a line): a side column's table
    shows twice the rows."""
    height = table.fontMetrics().height() + COMPACT_PAD
    table.verticalHeader().setMinimumSectionSize(height)
    table.verticalHeader().setDefaultSectionSize(height)
    return table


def table_height(table: QTableView, rows: int) -> int:
    """The height ``table`` needs to show its header and ``rows`` compact rows without scrolling."""
    header = 0 if table.horizontalHeader().isHidden() else table.horizontalHeader().sizeHint().height()
    return header + rows * table.verticalHeader().defaultSectionSize() + 2 * table.frameWidth() + 2


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


def _cell(text: object) -> str:
    """One cell for tab-separated text: a tab or line break inside it would split it into two cells or rows."""
    return " ".join(str(text).split()) if text is not None else ""


def rows_text(view: QAbstractItemView, rows: Iterable[int]) -> str:
    """``rows`` of ``view`` (in the view's order, sorted or not) as tab-separated lines, after a line of the column
    titles when the model has them: what a spreadsheet pastes as a table. Every column, hidden ones too: a narrow
    n-best list hides its scores for room, and the copy still has them."""
    model = view.model()
    columns = range(model.columnCount())
    titles = [_cell(model.headerData(c, Qt.Orientation.Horizontal)) for c in columns]
    lines = ["\t".join(titles)] if any(titles) else []
    lines += ["\t".join(_cell(model.data(model.index(r, c))) for c in columns) for r in rows]
    return "\n".join(lines)


def selected_rows(view: QAbstractItemView) -> list[int]:
    """The rows with a selected cell, top to bottom."""
    return sorted({index.row() for index in view.selectionModel().selectedIndexes()})


def copy_rows(view: QAbstractItemView, everything: bool = False) -> str:
    """Copy the selected rows of ``view`` (every row with ``everything``) to the clipboard; returns the text."""
    rows = range(view.model().rowCount()) if everything else selected_rows(view)
    text = rows_text(view, rows)
    QGuiApplication.clipboard().setText(text)
    return text


class _CopyKeys(QObject):
    """Ctrl+C on a table: the selected rows with the column titles, instead of Qt's current cell alone."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if isinstance(event, QKeyEvent) and event.matches(QKeySequence.StandardKey.Copy) \
                and isinstance(watched, QAbstractItemView):
            if event.type() == QEvent.Type.ShortcutOverride:
                event.accept()  # the table's, not a window shortcut's
                return True
            if event.type() == QEvent.Type.KeyPress:
                copy_rows(watched)
                return True
        return False


def copyable(view: ItemView) -> ItemView:
    """Make Ctrl+C copy ``view``'s selected rows as tab-separated text with a header line, and give it a context
    menu with Copy (the selected rows) and Copy all. Every table of the app goes through this one helper."""
    view.installEventFilter(_CopyKeys(view))
    view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
    view.customContextMenuRequested.connect(lambda pos, v=view: _copy_menu(v, pos))
    return view


def copy_menu(view: QAbstractItemView) -> QMenu:
    """The context menu of a ``copyable`` table (built on demand: it is short-lived)."""
    menu = QMenu(view)
    keys = QKeySequence(QKeySequence.StandardKey.Copy).toString(QKeySequence.SequenceFormat.NativeText)
    copy = menu.addAction(f"&Copy selected rows\t{keys}")  # the key as a hint: no second shortcut to clash
    copy.setEnabled(bool(selected_rows(view)))
    copy.triggered.connect(lambda checked=False: copy_rows(view))
    every = menu.addAction("Copy &all")
    every.setEnabled(view.model().rowCount() > 0)
    every.triggered.connect(lambda checked=False: copy_rows(view, everything=True))
    return menu


def _copy_menu(view: QAbstractItemView, pos: QPoint) -> None:
    menu = copy_menu(view)
    menu.exec(view.viewport().mapToGlobal(pos))
    menu.deleteLater()
