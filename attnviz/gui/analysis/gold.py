"""The Analysis tab's gold-alignment choice: the gold file and how the published set is written (numbering, which
side comes first), handed to the engine's one set reader (``engine.analysis.goldset``) as the command line's
``--gold``, ``--one-based``/``--zero-based`` and ``--reverse`` are."""

from __future__ import annotations

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QCheckBox, QComboBox, QFileDialog, QHBoxLayout, QPushButton, QWidget

from attnviz.gui.widgets import named, show_file

NUMBERINGS = (("numbering: detect", None), ("numbered from 1", True), ("numbered from 0", False))
GOLD_TIP = ("Gold links aligned with the corpus, one line per pair: i-j sure, ipj or i?j possible, source first (as "
            "the German-English set), or one link per line 'sentence pos pos [S|P]' (NAACL 2003: the Hansards, "
            "Romanian-English); the format is detected: adds the AER of every cross-attention head")


class GoldChoice(QWidget):
    """A gold file button, its numbering (detected, from 1, from 0) and whether the set lists the target first."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.path: str | None = None
        self.button = named(QPushButton("&Gold alignments..."), "goldButton", "Gold alignments", GOLD_TIP)
        self.numbering = named(QComboBox(), "goldNumbering", "Gold numbering",
                               "How the gold file numbers words: detected when the file allows it, or from 1 (the "
                               "published sets) or from 0")
        for text, value in NUMBERINGS:
            self.numbering.addItem(text, value)
        self.reverse = named(QCheckBox("Target s&ide first"), "goldReverse", "Gold lists the target side first",
                             "The set lists the model's target language first (gold links target-source, a "
                             "'|||' file target first), as the English-French Hansards do for a French-English "
                             "model")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        for widget in (self.button, self.numbering, self.reverse):
            row.addWidget(widget)
        self.button.clicked.connect(self._on_button_clicked)

    @Slot()
    def _on_button_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Gold alignments (one line per sentence pair)")
        self.set_path(path or None)

    def set_path(self, path: str | None) -> None:
        self.path = path
        show_file(self.button, "&Gold: ", path, "&Gold alignments...", GOLD_TIP)

    def options(self) -> tuple[str, bool | None, bool] | None:
        """(gold file, numbered from 1 or None to detect, target side first), or None without a gold file."""
        if self.path is None:
            return None
        return self.path, self.numbering.currentData(), self.reverse.isChecked()
