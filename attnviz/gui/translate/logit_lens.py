"""The logit lens in the Translate tab: a "Logit lens" page beside the step table that says, for the step shown,
what each decoder layer would predict if it were the last (its top tokens with their probabilities) and the
probability and rank of the token the model chose, so the user sees at which layer the word is decided. The Strip
button beside the caption swaps the table for the layer x step strip of the whole translation, each cell coloured by
the language of the layer's top token (a heuristic guess; ``gui.translate.lens_strip``); Export writes the strip as a
picture (PNG, SVG, PDF) or its cells as CSV or JSON, with the model and the rule of the language guess.

It is computed once per finished translation (teacher-forced on the decoded output, one pass) in its own worker when
the page is on screen (a translation the user never reads the lens of costs nothing, and no pass is left running when
the window closes), kept per sentence, and read for each step as the user scrubs. Kinds the lens is not defined for
(the LSTM) get the engine's sentence saying why.
"""

from __future__ import annotations

import csv
import io
import json
import threading
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QObject, Qt, Slot
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from attnviz.engine.text.tokenize import visible_token
from attnviz.gui.translate.layout import PAGE_ROWS
from attnviz.gui.translate.lens_strip import LensStrip
from attnviz.gui.widgets import compact_rows, copyable, named, table_height
from attnviz.gui.worker import JobFailure, Worker
from attnviz.session.translate.changes import Cleared, DocumentChange, Finished, PathShown, StepShown
from attnviz.session.translate.document import DecodeDocument

if TYPE_CHECKING:  # the module imports torch: the window opens without it
    from attnviz.engine.attribution.logit_lens import LogitLens

COLUMNS = ("Layer", "p(chosen)", "Rank", "Top tokens")
TOP = 3  # top tokens shown per layer
EXPORT_FILTERS = "PNG (*.png);;SVG (*.svg);;PDF (*.pdf);;CSV (*.csv);;JSON (*.json)"
PICTURES = (".png", ".svg", ".pdf")


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
        self.strip = LensStrip(self.document.go_to)
        self.strip_button = named(QToolButton(), "logitLensStripButton", "Strip",
                                  "Show every layer and step at once, coloured by the language of each layer's top "
                                  "token (a heuristic guess), instead of the table of the step shown")
        self.strip_button.setText("Strip")
        self.strip_button.setCheckable(True)
        self.strip_button.toggled.connect(self._on_strip_toggled)
        self.export_button = named(QToolButton(), "logitLensExportButton", "Export the logit lens",
                                   "Save the strip as PNG, SVG or PDF, or every layer and step as CSV or JSON")
        self.export_button.setText("Export\u2026")
        self.export_button.setEnabled(False)
        self.export_button.clicked.connect(self._on_export_clicked)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.table)
        self.stack.addWidget(self.strip)
        head = QHBoxLayout()
        head.setContentsMargins(0, 0, 0, 0)
        head.addWidget(self.caption, 1)
        head.addWidget(self.strip_button, 0, Qt.AlignmentFlag.AlignTop)
        head.addWidget(self.export_button, 0, Qt.AlignmentFlag.AlignTop)
        self.column = column = QVBoxLayout(self.widget)
        column.setContentsMargins(2, 2, 2, 2)
        column.addLayout(head)
        column.addWidget(self.stack, 1)
        self.widget.installEventFilter(self)  # the page coming on screen starts the lens of the translation shown
        self.worker = Worker(self)
        self.worker.produced.connect(self._on_worker_produced)
        self.worker.failed.connect(self._on_worker_failed)
        document.subscribe(self._on_document_changed)

    def need(self) -> int:
        """The page's height for its caption and ``PAGE_ROWS`` layers' rows."""
        margins = self.column.contentsMargins()
        buttons = self.strip_button.sizeHint().width() + self.export_button.sizeHint().width() + 12
        caption = self.caption.heightForWidth(max(self.widget.width() - margins.left() - margins.right() - buttons,
                                                  100))
        head = max(caption, self.strip_button.sizeHint().height())
        return head + self.column.spacing() + table_height(self.table, PAGE_ROWS) + margins.top() + margins.bottom()

    def set_translator(self, translator) -> None:
        self.worker.cancel()
        self.translator, self.lens, self._key = translator, None, None
        self._set_lens(None)
        self.show(-1)

    def _on_document_changed(self, change: DocumentChange) -> None:
        match change:
            case Cleared():
                self.worker.cancel()
                self._key = None
                self._set_lens(None)
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

        why = lens_not_defined(translator)
        if why is not None:
            self.caption.setText(f"The logit lens is not defined for a {translator.kind.title}: {why}.")
            return
        t = doc.translation(-1)
        key = (id(translator), t.src_tokens, t.tokens)
        if key == self._key:
            self.show(doc.current)
            return
        self._key = key
        self._set_lens(None)
        self.caption.setText("Reading every decoder layer through the output projection...")
        self.worker.start(_LensJob(translator, t.src_tokens, t.tokens))

    def show(self, step: int) -> None:
        """The rows of step ``step``: one per decoder layer, the first layer at the top."""
        lens = self.lens
        self.strip.set_step(step)
        if lens is None or not 0 <= step < len(lens.tokens):
            self.table.setRowCount(0)
            return
        decided = int(lens.decided_at()[step])
        chosen = visible_token(lens.tokens[step])
        when = f"decided at layer {decided} of {lens.layers}" if decided else "no layer ranks it first"
        self.caption.setText(f"Step {step + 1}, {chosen!r}: {when}.")
        self.caption.setToolTip(f"Each layer's output read through {lens.readout}.")
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
            self._set_lens(item)
            self.show(self.document.current)

    def _set_lens(self, lens: LogitLens | None) -> None:
        self.lens = lens
        self.strip.set_lens(lens)
        self.export_button.setEnabled(lens is not None)

    @Slot(bool)
    def _on_strip_toggled(self, on: bool) -> None:
        self.stack.setCurrentWidget(self.strip if on else self.table)
        self.show(self.document.current)

    @Slot()
    def _on_export_clicked(self) -> None:
        if self.lens is None:
            return
        path, chosen = QFileDialog.getSaveFileName(self.widget, "Export the logit lens", "logit-lens-strip.png",
                                                   EXPORT_FILTERS)
        if path:
            if not Path(path).suffix:
                path += "." + chosen.split("(*.")[-1].rstrip(")")
            self.caption.setText(self.save_file(path))

    def save_file(self, path: str) -> str:
        """Write the lens to ``path`` (the strip as a picture, or every cell as CSV/JSON, by the suffix); what
        happened, in a sentence."""
        lens = self.lens
        if lens is None:
            return "Nothing to export yet: translate a sentence and let the lens be read."
        suffix = Path(path).suffix.lower()
        info: dict[str, Any] = self.translator.info if self.translator is not None else {}
        try:
            if suffix in PICTURES:
                from attnviz.engine.export import model_name
                from attnviz.plots.lens_languages import save_language_strip

                title = f"Logit lens: {model_name(info)}, top token per decoder layer and step, coloured by language"
                save_language_strip(path, lens.top_language, lens.top_tokens[:, :, 0],
                                    [visible_token(t) for t in lens.tokens], title)
            elif suffix in (".csv", ".json"):
                Path(path).write_text(lens_text(lens, info, suffix), encoding="utf-8")
            else:
                return f"Cannot export {Path(path).name}: name a .png, .svg, .pdf, .csv or .json file."
        except OSError as exc:
            return f"Cannot save {path}: {exc.strerror or exc}"
        return f"Logit lens saved to {path}"

    @Slot(object)
    def _on_worker_failed(self, failure: JobFailure) -> None:
        self.caption.setText(f"The logit lens failed: {failure.text.splitlines()[0]}")


def lens_text(lens: LogitLens, info: dict, suffix: str) -> str:
    """Every layer and step of ``lens`` as CSV (a row per cell) or JSON (the sidecar's metadata, then the cells)."""
    cells = lens.cells()
    if suffix == ".csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(cells[0]) if cells else ["layer", "step"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(cells)
        return out.getvalue()
    from attnviz.engine.attribution.export import sidecar

    return json.dumps(sidecar(lens, info, None) | {"cells": cells}, indent=2, ensure_ascii=False) + "\n"


class _LensJob:
    """Worker job: the logit lens of one translation (its progress events, then the ``LogitLens``)."""

    def __init__(self, translator, src_tokens: tuple[str, ...], tokens: tuple[str, ...]):
        self.translator, self.src_tokens, self.tokens = translator, src_tokens, tokens

    def __call__(self, stop: threading.Event) -> Iterator[object]:
        from attnviz.engine.attribution.logit_lens import logit_lens_steps

        return logit_lens_steps(self.translator, self.src_tokens, self.tokens, top_k=TOP, stop=stop)
