"""The app's one data folder: where the Train and Analysis tabs find the corpora.

One setting (``data/dir`` in QSettings) for the whole window, shown and edited in the Train tab's Data folder field
and chosen from File > Data folder... or the Analysis tab. ``ATTNVIZ_DATA``, when set, is the folder of the session
(it wins over the remembered one, as the README promises); otherwise the remembered folder, else the engine's
default. A job that finds data missing says how to set it (``missing_data_hint``).
"""

from __future__ import annotations

import os

from PySide6.QtCore import QObject, QSettings, Signal, Slot
from PySide6.QtWidgets import QFileDialog, QLineEdit, QWidget

from attnviz.engine.corpus.reader import resolve_data_dir
from attnviz.gui.worker import JobFailure

KEY = "data/dir"
OLD_KEY = "train/data_dir"  # where the Train tab alone remembered it before
HINT = ("Set the data folder with File > Data folder... (or the Train tab's Data folder field), or start attnviz "
        "with ATTNVIZ_DATA=FOLDER.")


def missing_data_hint(failure: JobFailure) -> str:
    """What to add to a job's message: where to download the corpus it names (the Analysis tab has no Download
    button: the command, or the Train tab's), and how to set the data folder when that is the setting to change."""
    get = (f" To get it: run attnviz data download {failure.corpus} in a terminal, or use Download data in the Train "
           "tab (offered when Start finds the data missing)." if failure.corpus else "")
    return get + (f" {HINT}" if "data_dir" in failure.settings else "")


class DataFolder(QObject):
    """The data folder's current value; ``changed`` tells every tab that reads it."""

    changed = Signal(str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._path = str(resolve_data_dir())
        self._edits: list[QLineEdit] = []

    def path(self) -> str:
        return self._path

    @Slot(str)
    def set_path(self, path: str) -> None:
        path = path.strip()
        if not path or path == self._path:
            return
        self._path = path
        for edit in self._edits:
            if edit.text().strip() != path:
                edit.setText(path)
        self.changed.emit(path)

    def bind(self, edit: QLineEdit) -> None:
        """Keep ``edit`` (a field the user types the folder into) and the setting the same, both ways."""
        self._edits.append(edit)
        edit.setText(self._path)
        edit.textChanged.connect(self.set_path)

    def show_on(self, widget: QWidget) -> None:
        """Keep ``widget``'s tooltip naming the folder (a button that chooses it, say)."""
        def show(path: str) -> None:
            widget.setToolTip(f"The folder with the corpora, shared by the Train and Analysis tabs: {path}")

        show(self._path)
        self.changed.connect(show)

    def choose(self, parent: QWidget) -> bool:
        """Ask for a folder; True when one was chosen."""
        path = QFileDialog.getExistingDirectory(parent, "Data folder (the corpora)", self._path)
        if path:
            self.set_path(path)
        return bool(path)

    def restore(self, settings: QSettings) -> None:
        if os.environ.get("ATTNVIZ_DATA"):
            return  # set for this session: it wins over the folder remembered from an earlier one
        value = settings.value(KEY) or settings.value(OLD_KEY)
        if value:
            self.set_path(str(value))

    def save(self, settings: QSettings) -> None:
        settings.setValue(KEY, self._path)
