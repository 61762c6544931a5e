"""The Translate tab's views of one step: the source and output token strips (shaded by each other's
cross-attention on hover), the translation as text and the top-k chart. They follow the tab's ``DecodeDocument``
themselves (``on_document_changed``, subscribed after the tab's own listener, so that the attention panel has settled
on its layer and head for the step before the strips are shaded by it) and ask the attention panel only which layer
and head it shows, so the tab never relays between them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QScrollArea, QVBoxLayout, QWidget

from attnviz.gui.attention.panel import AttentionPanel
from attnviz.gui.translate.text import TranslationText
from attnviz.gui.translate.tokens import TokenStrip
from attnviz.gui.translate.topk import TopKView
from attnviz.gui.widgets import named, scrolled
from attnviz.session.translate.changes import Cleared, DocumentChange, Encoded, Finished, PathShown, StepShown
from attnviz.session.translate.document import DecodeDocument
from attnviz.session.translate.mode import ModeTexts

FOLDED = ("template", "instruction")  # an LLM prompt's roles whose runs fold into one chip each


def fold_prompt(tokens: Sequence[str], roles: Sequence[str]) -> tuple[list[str], list[str], list[range]]:
    """An LLM prompt as the Source strip shows it with *Prompt: sentence only*: each run of the chat template's
    tokens and each of the instruction's one chip ("template×12": no space, which a strip would draw as a glyph), the
    sentence's tokens as they are. Returns the chips' labels, their roles and the prompt positions of each chip."""
    labels, kept, groups = list[str](), list[str](), list[range]()
    start = 0
    for i in range(1, len(tokens) + 1):
        if i < len(tokens) and roles[i] == roles[start] and roles[i] in FOLDED:
            continue
        role = roles[start]
        labels += [f"{role}\u00d7{i - start}"] if role in FOLDED else list(tokens[start:i])
        kept += [role] * (1 if role in FOLDED else i - start)
        groups += [range(start, i)] if role in FOLDED else [range(j, j + 1) for j in range(start, i)]
        start = i
    return labels, kept, groups


class StepViews(QObject):
    """The token strips, the text and the top-k chart of the document's current step (their widgets are built here
    and laid out by the tab)."""

    def __init__(self, document: DecodeDocument, attention: AttentionPanel, parent: QObject | None = None):
        super().__init__(parent)
        self.document, self.attention = document, attention
        self.fold = True  # an LLM prompt's template and instruction as one chip each (Prompt: sentence only)
        self._groups: list[range] | None = None  # the prompt positions of each Source chip, when folded
        self.source_view = named(TokenStrip("Source tokens appear here", "Source"), "sourceView", "Source tokens",
                                 "Source tokens as the model reads them; hover one to see which outputs attended to "
                                 "it. Shading is relative to the largest weight of the row shown (the darkest is "
                                 "not necessarily near 1).")
        self.output_view = named(TokenStrip("The translation appears here, token by token", "Translation"),
                                 "outputView", "Output tokens", "Output tokens; hover one to see its cross-attention "
                                 "on the source. Shading is relative to the largest weight.")
        self.translation_text = TranslationText()
        self.topk_view = TopKView()
        self.output_view.hovered.connect(self._on_output_hovered)
        self.source_view.hovered.connect(self._on_source_hovered)
        self.attention.selection_changed.connect(self._on_attention_selection_changed)

    def tokens_box(self) -> QScrollArea:
        """The source and output token strips (each titled in its first row), for the side column (scrolled when a
        long sentence needs more rows than the column gives; the translation's text under it)."""
        box = QWidget()
        tokens = QVBoxLayout(box)
        tokens.setContentsMargins(0, 0, 0, 0)
        tokens.setSpacing(2)
        tokens.addWidget(self.source_view)
        tokens.addWidget(self.output_view)
        tokens.addStretch(1)
        return scrolled(box, "tokensScroll")

    def show_mode(self, texts: ModeTexts, generating: bool) -> None:
        """The mode's words (translating or generating); a language model has no source strip."""
        self.output_view.set_title(texts.output_title)
        self.output_view.set_placeholder(texts.output_placeholder)
        self.translation_text.set_placeholder(texts.text_placeholder)
        self.topk_view.placeholder = texts.topk_placeholder
        self.source_view.setVisible(not generating)

    def on_document_changed(self, change: DocumentChange) -> None:
        match change:
            case Cleared():
                self.source_view.set_tokens([])
                self.output_view.set_tokens([])
                self.topk_view.set_candidates([], None)
                self.translation_text.set_text("", finished=False)
            case Encoded():
                self._show_source()
                self.show_step()
            case PathShown() | StepShown():
                self.show_step()
            case Finished():
                self._show_text()

    @Slot(bool)
    def set_fold(self, fold: bool) -> None:
        """Fold an LLM prompt's template and instruction into one chip each, or show every prompt token."""
        self.fold = fold
        if self.document.encoder is not None:
            self._show_source()
            self._shade_source_by(self.document.current)

    def _show_source(self) -> None:
        encoder = self.document.encoder
        if encoder is None:
            return
        tokens, roles = encoder.src_tokens, encoder.roles
        if self.fold and roles and len(roles) == len(tokens):
            labels, kept, self._groups = fold_prompt(tokens, roles)
            self.source_view.set_tokens(labels, roles=kept)
        else:
            self._groups = None
            self.source_view.set_tokens(tokens, roles=roles)

    def _chips(self, values: np.ndarray) -> np.ndarray:
        """Values over the prompt's positions as over the Source strip's chips: a folded chip's is its tokens' sum
        (the attention its run of the template or the instruction holds)."""
        if self._groups is None:
            return values
        return np.array([values[g.start:g.stop].sum() for g in self._groups], dtype=values.dtype)

    def show_step(self) -> None:
        """Every view here as of the document's step."""
        doc = self.document
        if doc.encoder is None:
            return
        current = doc.current
        steps = doc.steps[: current + 1] if current >= 0 else []
        self.output_view.set_tokens([s.token for s in steps], current, [s.token for s in doc.steps])
        step = steps[-1] if steps else None
        self.topk_view.set_candidates(step.topk if step else [], step.entropy if step else None,
                                      (step.token, step.probability) if step else None, bool(step and step.forced))
        self._show_text()
        self._shade_source_by(current)

    def _show_text(self) -> None:
        """The translation as text: the whole one once decoded (scrubbing does not change it), else so far."""
        doc = self.document
        self.translation_text.set_text(doc.text() if doc.steps else "", doc.finished and bool(doc.steps))

    def _shade_source_by(self, step: int) -> None:
        row = self.document.cross_row(step, self.attention.layer, self.attention.head)
        if row is not None:
            row = self._chips(np.asarray(row))
        self.source_view.set_weights(None if row is None else row / max(float(row.max()), 1e-9))

    @Slot(int)
    def _on_output_hovered(self, index: int) -> None:
        self._shade_source_by(index if index >= 0 else self.document.current)

    @Slot(int)
    def _on_source_hovered(self, index: int) -> None:
        doc, shown = self.document, self.attention
        positions = range(index, index + 1) if self._groups is None or index < 0 else self._groups[index]
        found = [doc.cross_column(i, doc.current, shown.layer, shown.head) for i in positions]
        columns = [c for c in found if c is not None]
        column = np.sum(columns, axis=0) if index >= 0 and columns and len(columns) == len(found) else None
        self.output_view.set_weights(None if column is None else column / max(float(column.max()), 1e-9))

    @Slot()
    def _on_attention_selection_changed(self) -> None:
        self._shade_source_by(self.document.current)
