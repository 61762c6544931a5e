"""The Analysis tab's head-importance page: the BLEU lost when each head alone is switched off, as a layer x head map
per attention kind, computed in the background (progress with an ETA, the map filling in head by head, Cancel) or
opened from a file that ``attnviz head-importance --out`` (or this page's Save) wrote. Every figure comes with its
bootstrap interval (hover a cell), and the summary says how many heads' losses this corpus can tell from noise.
A new computation, or Cancel, clears the previous map: a map always belongs to the settings shown beside it.

The engine (``engine.analysis.importance``) does the work; this page asks for it and shows its ``ImportanceReady``.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from attnviz.engine.analysis.importance import HeadScore, ImportanceProgress, ImportanceReady, kinds_to_measure
from attnviz.engine.analysis.jobs import importance_job
from attnviz.engine.analysis.llm_heads import importance_notes
from attnviz.engine.analysis.names import note_lines
from attnviz.engine.errors import AttnvizError
from attnviz.engine.events import ATTENTION_KINDS
from attnviz.engine.training.clock import format_left
from attnviz.gui.analysis.llm_notes import group_size
from attnviz.gui.analysis.widgets import HeadMap
from attnviz.gui.data_folder import missing_data_hint
from attnviz.gui.widgets import add_labelled, named
from attnviz.gui.worker import JobFailure, Worker

ALL_VIEWS = "Every view (one attention)"  # a decoder-only model: a head is off in the prompt and every output step
JSON_FILTER = "Head importance (*.json);;All files (*)"


def sample_text(result: ImportanceReady) -> str:
    """What a result measured when it switched off a random sample of heads ("" when every head)."""
    drawn = result.sample
    return (f" Measured {drawn['measured']} of {drawn['of']} heads, drawn at random (seed {drawn['seed']}); the "
            "blank tiles were not switched off." if drawn else "")


def kind_label(result: ImportanceReady | None, kind: str) -> str:
    """The name of an attention kind measured: an LLM's one attention, whose views are the same heads, as such."""
    if result is not None and result.extra.get("same_heads"):
        return ALL_VIEWS
    return ATTENTION_KINDS[kind].label if kind in ATTENTION_KINDS else kind


class ImportanceMap(HeadMap):
    """The BLEU lost per layer and head; hovering (or the arrow keys) tells the exact figures."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("importanceMap")
        self.setAccessibleName("BLEU lost per layer and head")
        self.placeholder = "Compute head importance, or open a saved file, to see the BLEU each head is worth"
        self.result: ImportanceReady | None = None
        self.kind: str | None = None

    def show_result(self, result: ImportanceReady | None, kind: str | None) -> None:
        self.result, self.kind = result, kind
        if result is None or kind not in result.layout:
            self.set_data(None)
            return
        label = kind_label(result, kind)
        self.show_matrix(result.matrix(kind), f"{label}: BLEU lost when the head alone is off "
                         f"(baseline {result.baseline:.2f})", False, signed=True)

    def describe_cell(self, row: int, col: int) -> str:
        if self.result is None:
            return super().describe_cell(row, col)
        score = next((h for h in self.result.heads if (h.kind, h.layer, h.head) == (self.kind, row, col)), None)
        if score is None:
            return f"layer {row + 1}, head {col + 1}: not measured (yet)"
        return (f"layer {row + 1}, head {col + 1}: BLEU lost {score.describe()}; BLEU {score.bleu:.2f} with it off, "
                f"{self.result.baseline:.2f} with every head on")


def noise_text(result: ImportanceReady) -> str:
    """How many heads' losses the corpus tells from noise (their 95% bootstrap interval excludes 0)."""
    measured = [h for h in result.heads if h.interval is not None]
    if not measured:
        return ""
    clear = sum(h.clear() for h in measured)
    return (f" {clear} of {len(measured)} heads' losses are clear of noise (95% bootstrap interval over the "
            f"{result.sentences} sentences excludes 0); hover a head for its interval.")


class ImportancePanel(QWidget):
    status = Signal(str)

    def __init__(self, corpus, data_dir, parent: QWidget | None = None):
        """``corpus()`` returns the Analysis tab's choice: (split or None, source file, reference file);
        ``data_dir()`` the app's data folder."""
        super().__init__(parent)
        self.corpus, self.data_dir = corpus, data_dir
        self.translator = None
        self.result: ImportanceReady | None = None
        self.partial: ImportanceReady | None = None  # the heads measured so far by the running computation
        self.worker = Worker(self)
        self.limit_spin = named(QSpinBox(), "importanceLimitSpin", "Sentences for head importance",
                                "The corpus is decoded once per head: use the first N sentences (0 = all)")
        self.limit_spin.setRange(0, 1_000_000)
        self.limit_spin.setSpecialValueText("all")
        self.limit_spin.setValue(100)
        self.sample_spin = named(QSpinBox(), "importanceSampleSpin", "Heads to switch off",
                                 "Switch off only N heads drawn at random (seed 0; all = every head): a 12 x 16-head "
                                 "model would decode the corpus 577 times. The map leaves the others blank")
        self.sample_spin.setRange(0, 1_000_000)
        self.sample_spin.setSpecialValueText("all")
        self.kind_combo = named(QComboBox(), "importanceKindCombo", "Attention kind of the importance map")
        self.compute_button = named(QPushButton("Com&pute"), "computeImportanceButton", "Compute head importance",
                                    "Switch each head off alone and measure the BLEU lost on the corpus chosen above")
        self.cancel_button = named(QPushButton("Canc&el"), "cancelImportanceButton", "Cancel head importance")
        self.open_button = named(QPushButton("Open sa&ved..."), "openImportanceButton", "Open saved head importance",
                                 "A JSON file from attnviz head-importance --out, or saved here")
        self.save_button = named(QPushButton("E&xport..."), "saveImportanceButton", "Save head importance as JSON")
        self.progress = named(QProgressBar(), "importanceProgress", "Head importance progress")
        self.progress.setFormat("%v / %m decodes")
        self.summary = named(QLabel(), "importanceSummary", "Head importance summary")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.map = ImportanceMap()
        self._layout()
        self.compute_button.clicked.connect(self.compute)
        self.cancel_button.clicked.connect(self.cancel)
        self.open_button.clicked.connect(self._on_open_clicked)
        self.save_button.clicked.connect(self._on_save_clicked)
        self.kind_combo.currentIndexChanged.connect(self._show)
        self.worker.produced.connect(self._on_produced)
        self.worker.failed.connect(self._on_failed)
        self.worker.finished.connect(self._on_finished)
        self.set_translator(None)

    def _layout(self) -> None:
        choices = QHBoxLayout()
        add_labelled(choices, (("Sentence&s:", self.limit_spin), ("Heads to chec&k:", self.sample_spin),
                               ("&Attention:", self.kind_combo)))
        choices.addStretch(1)
        self.kind_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        running = QHBoxLayout()
        for button in (self.compute_button, self.cancel_button):
            running.addWidget(button)
        running.addWidget(self.progress, 1)
        running.addWidget(self.open_button)
        running.addWidget(self.save_button)
        layout = QVBoxLayout(self)
        layout.addLayout(choices)
        layout.addLayout(running)
        layout.addWidget(self.summary)
        layout.addWidget(self.map, 1)
        self.summary.setText("Each head is switched off alone and the corpus chosen above is translated again "
                             "(greedy); the map shows the BLEU lost, each with a bootstrap interval. It decodes the "
                             "corpus once per head. The validation split is the default (as attnviz "
                             "head-importance): choosing heads is tuning, which stays off the test split.")

    def set_translator(self, translator) -> None:
        self.worker.cancel()
        self.translator = translator
        self._set_running(False)

    def _set_running(self, running: bool) -> None:
        can = self.translator is not None and self.translator.has_source
        self.compute_button.setEnabled(can and not running)
        self.cancel_button.setEnabled(running)
        self.limit_spin.setEnabled(not running)
        self.sample_spin.setEnabled(not running)
        self.open_button.setEnabled(not running)
        self.save_button.setEnabled(self.result is not None and not running)

    def compute(self) -> None:
        split, src, tgt = self.corpus()
        if self.translator is None:
            return
        if split is None and not (src and tgt):
            self.status.emit("Head importance needs references: choose a source file and its reference file")
            return
        translator, corpus, limit, data = self.translator, (split, src, tgt), self.limit_spin.value(), self.data_dir()
        layout = kinds_to_measure(translator, None)  # an LLM's one set of heads once
        self.result = None  # the old map goes: it belonged to other settings
        self.partial = ImportanceReady(0.0, (), layout, 0, "running", extra=importance_notes(translator))
        self._fill_kinds(layout)
        self.map.set_data(None)
        self.map.placeholder = "Decoding the corpus with every head on; then the map fills in head by head"
        self.summary.setText("Measuring: the map fills in as each head is switched off.")
        self.status.emit("Measuring head importance...")
        self.progress.setValue(0)
        self._set_running(True)
        sample = self.sample_spin.value() or None
        self.worker.start(lambda stop: importance_job(translator, corpus, limit, stop, data, sample))

    @Slot()
    def cancel(self) -> None:
        if not self.is_running():
            return
        self.worker.cancel()
        measured = len(self.partial.heads) if self.partial is not None else 0
        self.result = self.partial = None  # a partial map is not kept: it would read as a finished one
        self.map.show_result(None, None)
        self.map.placeholder = "Cancelled: press Compute to measure head importance"
        self.summary.setText(f"Cancelled after {measured} heads; nothing was kept. Press Compute to measure again.")
        self._set_running(False)
        self.status.emit("Head importance cancelled")

    def is_running(self) -> bool:
        return self.worker.is_running()

    @Slot(object)
    def _on_produced(self, event) -> None:
        if isinstance(event, ImportanceProgress):
            self.progress.setMaximum(event.total)
            self.progress.setValue(event.done)
            eta = f" · {format_left(event.eta_s)}" if event.eta_s is not None else ""
            self.progress.setFormat(f"%v / %m decodes{eta}")
            if self.partial is not None and event.baseline is not None:
                self._show_partial(event.score, event.baseline, event.total - 1)
        elif isinstance(event, ImportanceReady):
            self.partial = None
            self.progress.setFormat("%v / %m decodes")
            self.set_result(event)

    def _show_partial(self, score: HeadScore | None, baseline: float, heads: int) -> None:
        """The map as it fills: the heads measured so far, the others blank ("not measured yet" on hover)."""
        assert self.partial is not None
        measured = self.partial.heads + ((score,) if score is not None else ())
        self.partial = ImportanceReady(baseline, measured, self.partial.layout, 0, "running", extra=self.partial.extra)
        self.summary.setText(f"Measuring: {len(measured)} of {heads} heads so far (baseline bleu_tok "
                             f"{baseline:.2f}); the map fills in as each head is switched off.")
        self.map.show_result(self.partial, self.kind_combo.currentData())

    @Slot(object)
    def _on_failed(self, failure: JobFailure) -> None:
        first_line = failure.text.splitlines()[0] + missing_data_hint(failure)
        self.summary.setText(f"<b>Head importance failed:</b> {first_line}")
        self.status.emit(first_line)

    @Slot()
    def _on_finished(self) -> None:
        self._set_running(False)

    def _fill_kinds(self, layout) -> None:
        current = self.kind_combo.currentData()
        self.kind_combo.blockSignals(True)
        self.kind_combo.clear()
        for kind in layout:
            self.kind_combo.addItem(kind_label(self.result or self.partial, kind), kind)
        self.kind_combo.setCurrentIndex(max(0, self.kind_combo.findData(current)))
        self.kind_combo.blockSignals(False)

    def set_result(self, result: ImportanceReady) -> None:
        self.result = result
        self._fill_kinds(result.layout)
        top = result.heads[0] if result.heads else None
        best = (f" Most important: {top.kind} layer {top.layer + 1}, head {top.head + 1}, {top.describe()}."
                if top is not None else "")
        self.summary.setText(f"Baseline bleu_tok {result.baseline:.2f} on {result.sentences} sentences "
                             f"({result.source}, {result.decode}); colour: BLEU lost when the head alone is off "
                             f"(red: it helps; blue: the corpus scores better without it).{best}"
                             f"{noise_text(result)}{sample_text(result)}"
                             + "".join(f"<br>{escape(line)}" for line in note_lines(result.extra)))
        self.map.kv_group = group_size(result.extra)  # lines part grouped-query attention's groups
        self._set_running(self.is_running())
        self._show()
        self.status.emit(f"Head importance: {len(result.heads)} heads measured")

    @Slot()
    def _show(self) -> None:
        self.map.show_result(self.result, self.kind_combo.currentData())

    def open_file(self, path: str) -> None:
        try:
            self.set_result(ImportanceReady.from_json(json.loads(Path(path).read_text(encoding="utf-8"))))
        except (OSError, ValueError, AttnvizError) as exc:
            self.summary.setText(f"<b>Cannot open {Path(path).name}:</b> {exc}")
            self.status.emit(f"Cannot open {path}")

    def save_file(self, path: str) -> None:
        if self.result is None:  # Save is offered once there is a result
            return
        data = {"model": (self.translator.metadata.get("path") if self.translator is not None else None),
                **self.result.to_json()}
        try:
            Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        except OSError as exc:
            self.status.emit(f"Cannot save {path}: {exc.strerror or exc}")
            return
        self.status.emit(f"Head importance saved to {path}")

    @Slot()
    def _on_open_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open head importance", "", JSON_FILTER)
        if path:
            self.open_file(path)

    @Slot()
    def _on_save_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save head importance", "head-importance.json", JSON_FILTER)
        if path and self.result is not None:
            self.save_file(path)

