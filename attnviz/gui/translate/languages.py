"""The Translate tab's language picker for a multilingual model (NLLB-200, M2M100, mBART-50): the source language
(guessed from each sentence by default, as ``engine.text.languages`` states) and the target (English by default),
each one of the model's language tags. Hidden for a model of one language pair. A choice makes a view of the model
with those languages (``Translator.choosing``), which the window then uses (``chosen``): a job running on the old
view never reads a half-changed pair."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from attnviz.engine.text.languages import iso
from attnviz.engine.text.tokenize import LANGUAGE_NAMES
from attnviz.gui.widgets import named

if TYPE_CHECKING:  # the translator's type only: importing it would import torch before the window shows
    from attnviz.engine.translator import Translator

GUESS = "Guess from the text"


def tag_label(tag: str) -> str:
    """``deu_Latn`` -> "deu_Latn (German)" for the languages the app names, else the tag."""
    name = LANGUAGE_NAMES.get(iso(tag))
    return f"{tag} ({name})" if name else tag


class LanguagePicker(QWidget):
    """'Convert [Guess from the text | tags...] into [tags...]' for the translator set last."""

    chosen = Signal(object)  # a view of the translator with the languages chosen

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.translator: Translator | None = None
        self.src_combo = named(QComboBox(), "srcLangCombo", "Source language",
                               "The source language: guessed from each sentence (its script and frequent words), or "
                               "the one chosen here; the model reads its tag before the sentence")
        self.tgt_combo = named(QComboBox(), "tgtLangCombo", "Target language",
                               "The language to translate into: its tag is forced as the first output token")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        # "Convert [source] into [target]": one letter for the pair (Alt+V, then Tab), since every letter of
        # "From", "Into", "Input", "Output", "Source" and "Target" has an owner where the Translate tab shows
        label = QLabel("Con&vert")
        label.setBuddy(self.src_combo)
        for widget in (label, self.src_combo, QLabel("into"), self.tgt_combo):
            row.addWidget(widget)
        for combo in (self.src_combo, self.tgt_combo):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(20)
        row.addStretch(1)
        self.src_combo.activated.connect(self._on_combo_activated)
        self.tgt_combo.activated.connect(self._on_combo_activated)
        self.setVisible(False)

    def set_translator(self, translator: Translator | None) -> None:
        """Offer ``translator``'s languages (hidden when it has none), showing its current choice."""
        self.translator = translator
        languages = translator.languages if translator is not None else None
        self.setVisible(languages is not None)
        self.src_combo.clear()
        self.tgt_combo.clear()
        if languages is None:
            return
        self.src_combo.addItem(GUESS, None)
        for tag in languages.tags:
            self.src_combo.addItem(tag_label(tag), tag)
            self.tgt_combo.addItem(tag_label(tag), tag)
        self.src_combo.setCurrentIndex(max(self.src_combo.findData(languages.src), 0))
        self.tgt_combo.setCurrentIndex(self.tgt_combo.findData(languages.tgt))

    @Slot(int)
    def _on_combo_activated(self, index: int) -> None:
        if self.translator is None or self.translator.languages is None:
            return
        src, tgt = self.src_combo.currentData() or "auto", self.tgt_combo.currentData()
        languages = self.translator.languages
        if (languages.src or "auto", languages.tgt) != (src, tgt):
            self.chosen.emit(self.translator.choosing(src=src, tgt=tgt))
