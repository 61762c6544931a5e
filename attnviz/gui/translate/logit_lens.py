"""The logit lens in the Translate tab: a "Logit lens" page beside the step table that says, for the step shown,
what each decoder layer would predict if it were the last (its top tokens with their probabilities) and the
probability and rank of the token the model chose, so the user sees at which layer the word is decided.

It is computed once per finished translation (teacher-forced on the decoded output, one pass) in its own worker when
the page is on screen (a translation the user never reads the lens of costs nothing, and no pass is left running when
the window closes), kept per sentence, and read for each step as the user scrubs. Kinds the lens is not defined for
(the LSTM) get the engine's sentence saying why.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Qt, Slot
from PySide6.QtWidgets import QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from attnviz.engine.text.tokenize import visible_token
from attnviz.gui.translate.changes import Cleared, DocumentChange, Finished, PathShown, StepShown
from attnviz.gui.translate.document import DecodeDocument
from attnviz.gui.translate.layout import PAGE_ROWS
from attnviz.gui.widgets import compact_rows, copyable, named, table_height
from attnviz.gui.worker import JobFailure, Worker

if TYPE_CHECKING:  # the module imports torch: the window opens without it
    from attnviz.engine.attribution.logit_lens import LogitLens

COLUMNS = ("Layer", "p(chosen)", "Rank", "Top tokens")
TOP = 3  # top tokens shown per layer


class LogitLensPage(QObject):
    """The page (``widget``) and the work behind it."""

    def __init__(self, document: DecodeDocument, parent: QObject | None = None):
        super().__init__(parent)
        self.document = document
        self.translator = None
        self.lens: LogitLens | None = None
        self._key: Hashable = None  # the translation the lens (or its job) belongs to
        self.widget = QWidget()
        self.caption = QLabel("Translate a sentence: each decoder layer's prediction for the step shows here.")
        self.caption.setWordWrap(True)
        self.caption.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = compact_rows(copyable(named(QTableWidget(0, len(COLUMNS)), "logitLensTable", "Logit lens",
                                    "What each decoder layer would predict at this step; Ctrl+C copies the rows")))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.column = column = QVBoxLayout(self.widget)
        column.setContentsMargins(2, 2, 2, 2)
        column.addWidget(self.caption)
        column.addWidget(self.table, 1)
        self.widget.installEventFilter(self)  # the page coming on screen starts the lens of the translation shown
        self.worker = Worker(self)
        self.worker.produced.connect(self._on_worker_produced)
        self.worker.failed.connect(self._on_worker_failed)
        document.subscribe(self._on_document_changed)

    def need(self) -> int:
        """The page's height for its caption and ``PAGE_ROWS`` layers' rows."""
        margins = self.column.contentsMargins()
        caption = self.caption.heightForWidth(max(self.widget.width() - margins.left() - margins.right(), 100))
        return caption + self.column.spacing() + table_height(self.table, PAGE_ROWS) + margins.top() + margins.bottom()

    def set_translator(self, translator) -> None:
        self.worker.cancel()
        self.translator, self.lens, self._key = translator, None, None
        self.show(-1)

    def _on_document_changed(self, change: DocumentChange) -> None:
        match change:
            case Cleared():
                self.worker.cancel()
                self.lens, self._key = None, None
                self.show(-1)
            case Finished() | PathShown() if self.document.finished and self.widget.isVisible():
                self._start()
            case StepShown(step=step):
                self.show(step)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.widget and event.type() == QEvent.Type.Show and self.document.finished:
            self._start()
        return False

    def _start(self) -> None:
        doc, translator = self.document, self.translator
        if translator is None or not doc.steps:
            return
        from attnviz.engine.attribution.logit_lens import lens_not_defined  # torch is loaded with the model

        why = lens_not_defined(translator.kind)
        if why is not None:
            self.caption.setText(f"The logit lens is not defined for a {translator.kind.title}: {why}.")
            return
        t = doc.translation(-1)
        key = (id(translator), t.src_tokens, t.tokens)
        if key == self._key:
            self.show(doc.current)
            return
        self.lens, self._key = None, key
        self.caption.setText("Reading every decoder layer through the output projection...")
        self.worker.start(_LensJob(translator, t.src_tokens, t.tokens))

    def show(self, step: int) -> None:
        """The rows of step ``step``: one per decoder layer, the first layer at the top."""
        lens = self.lens
        if lens is None or not 0 <= step < len(lens.tokens):
            self.table.setRowCount(0)
            return
        decided = int(lens.decided_at()[step])
        chosen = visible_token(lens.tokens[step])
        when = f"decided at layer {decided} of {lens.layers}" if decided else "no layer ranks it first"
        self.caption.setText(f"Step {step + 1}, {chosen!r}: {when}. Each layer's output read through "
                             f"{lens.readout}.")
        self.table.setRowCount(lens.layers)
        for layer in range(lens.layers):
            tops = ", ".join(f"{visible_token(str(t))} {p:.2f}" for t, p in
                             zip(lens.top_tokens[layer, step, :TOP], lens.top_probs[layer, step, :TOP]))
            cells = (f"{layer + 1}", f"{lens.chosen_prob[layer, step]:.3f}", f"{int(lens.chosen_rank[layer, step])}",
                     tops)
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col < 3:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(layer, col, item)

    @Slot(object)
    def _on_worker_produced(self, item) -> None:
        if hasattr(item, "chosen_rank"):  # the LogitLens, after its progress events
            self.lens = item
            self.show(self.document.current)

    @Slot(object)
    def _on_worker_failed(self, failure: JobFailure) -> None:
        self.caption.setText(f"The logit lens failed: {failure.text.splitlines()[0]}")


class _LensJob:
    """Worker job: the logit lens of one translation (its progress events, then the ``LogitLens``)."""

    def __init__(self, translator, src_tokens: tuple[str, ...], tokens: tuple[str, ...]):
        self.translator, self.src_tokens, self.tokens = translator, src_tokens, tokens

    def __call__(self, stop: threading.Event) -> Iterator[object]:
        from attnviz.engine.attribution.logit_lens import logit_lens_steps

        return logit_lens_steps(self.translator, self.src_tokens, self.tokens, top_k=TOP, stop=stop)
