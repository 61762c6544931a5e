"""The Translate tab's Quantity choice at work: which quantity the attention panel shows, computing it in a worker
on the finished translation (teacher-forced on the decoded output, every step at once) with progress and Cancel,
keeping results per sentence, method and settings, and feeding the panel (and the map beside it) for the step shown,
the source-share bars under the output tokens and the step table's Source share column. "Why this and not ...?" in
the top-k chart's menu asks a contrastive attribution (the method shown if it takes a foil, else the first that does).
It also holds the logit lens page beside the step table and the suspect-score line under the translated text.

While a quantity is computed, or when the decode has not finished yet, the map shows attention; Cancel (or a
failure) leaves it there and sets the selector back to Attention, saying why in the status bar (a failed method with
a typed setting, activation patching's corrupted source, stays chosen so that the text can be corrected).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from PySide6.QtCore import QObject, QSettings, Signal, SignalInstance, Slot
from PySide6.QtWidgets import QTableView, QWidget

from attnviz.engine.analysis.sinks import WHY
from attnviz.gui.attention.heatmap import HeatmapData
from attnviz.gui.attention.panel import AttentionPanel
from attnviz.gui.translate.explorer import SearchExplorer
from attnviz.gui.translate.logit_lens import LogitLensPage
from attnviz.gui.translate.quantity_bar import QuantityBar
from attnviz.gui.translate.step_model import StepTableModel
from attnviz.gui.translate.suspect_line import SuspectLine
from attnviz.gui.translate.text import TranslationText
from attnviz.gui.translate.tokens import TokenStrip
from attnviz.gui.translate.topk import TopKView
from attnviz.gui.widgets import stored
from attnviz.gui.worker import JobFailure, Worker
from attnviz.session.translate.changes import Cleared, DocumentChange, Encoded, Finished, PathShown, StepShown
from attnviz.session.translate.document import DecodeDocument
from attnviz.session.translate.quantities import (
    ATTENTION,
    TYPED,
    Quantity,
    QuantityCache,
    QuantityJob,
    QuantityProgress,
    QuantityResult,
    cache_key,
    contribution_quantities,
    export_fields,
    kept_settings,
    quantities,
    refusal,
    setting_choices,
)
from attnviz.session.translate.quantity_source import QuantitySource


class QuantityHost(Protocol):
    """What the quantity control reads of the Translate tab."""

    document: DecodeDocument
    attention: AttentionPanel
    output_view: TokenStrip
    topk_view: TopKView
    step_table: QTableView
    search: SearchExplorer  # its side tabs get the Logit lens page
    translation_text: TranslationText  # the suspect score's line goes under it
    translator: Any  # read when the document is cleared: a new model clears it
    status: SignalInstance


class QuantityControl(QObject):
    status = Signal(str)

    def __init__(self, host: QuantityHost):
        super().__init__(host if isinstance(host, QObject) else None)
        self.host, self.document, self.panel, self.output_view = host, host.document, host.attention, host.output_view
        self.step_table = host.step_table
        document, panel, topk_view = host.document, host.attention, host.topk_view
        self.status.connect(host.status)
        self.lens = LogitLensPage(host.document, self)  # what each decoder layer would predict at the step
        host.search.add_page(self.lens.widget, "Logit lens", self.lens.need)
        self.suspect = SuspectLine(host.document, self)  # the sentence's suspect-translation score
        host.translation_text.add_line(self.suspect.label)
        model = self.step_table.model()
        assert isinstance(model, StepTableModel)
        self.step_model = model
        self._settings: dict[str, dict[str, Any]] = {}  # per method, the settings asked beside its defaults
        self.bar = QuantityBar()
        panel.add_controls([self.bar.label, self.bar.combo, self.bar.corrupt_box], [self.bar.options], [self.bar.busy],
                           [self.bar.settings_button])
        QWidget.setTabOrder(self.bar.combo, self.bar.corrupt_edit)  # Tab from the selector (Alt+Q) to its text
        self.worker = Worker(self)
        self.cache = QuantityCache()
        self.translator = None
        self._restored = ""  # the quantity chosen last session (restore_settings), shown once a model offers it
        self.quantities: list[Quantity] = contribution_quantities(None)
        self.result: QuantityResult | None = None  # what the map shows (None: attention)
        self._job_key: object = None  # the cache key of the job running
        self.bar.set_quantities(self.quantities)
        self.bar.chosen.connect(self._on_bar_chosen)
        self.bar.cancelled.connect(self.cancel)
        self.bar.setting_changed.connect(self._on_bar_setting_changed)
        self.bar.options_changed.connect(self._on_bar_options_changed)
        self.worker.produced.connect(self._on_worker_produced)
        self.worker.failed.connect(self._on_worker_failed)
        self.worker.finished.connect(self._on_worker_finished)
        topk_view.foil.connect(self.contrast)
        host.search.foil.connect(self.contrast)  # the same question from a what-if branch's row
        document.subscribe(self._on_document_changed)
        panel.follow(document, self.source)  # after this controller: a cleared document has dropped its result

    # -- choices -----------------------------------------------------------------------------------------------------

    def set_translator(self, translator) -> None:
        self.worker.cancel()
        self.bar.idle()
        self.translator, self.result = translator, None
        self.bar.span_check.setVisible(translator is not None and translator.kind.reads_prompt)
        self.lens.set_translator(translator)
        self.suspect.set_translator(translator)
        self.cache.clear()
        self.quantities = quantities(translator)
        self.bar.set_quantities(self.quantities)
        for q in self.quantities:  # settings read back from the last session: values the menus offer, typed texts
            if q.key in self._settings:
                self._settings[q.key] = kept_settings(q, self._settings[q.key])
        if self._restored and any(q.key == self._restored for q in self.quantities):
            self.bar.show_key(self._restored)  # the last session's choice, once a model offers it
        if self.wanted.why_not:
            self.bar.show_key(ATTENTION)
        self._show_settings(self.wanted)

    def save_settings(self, settings: QSettings) -> None:
        """The quantity chosen, each method's settings (a foil belongs to its sentence: not kept), the toggles."""
        settings.setValue("translate/quantity", self.wanted.key)
        kept = {key: {k: v for k, v in chosen.items() if k != "foil"} for key, chosen in self._settings.items()}
        settings.setValue("translate/quantitySettings", json.dumps(kept))
        settings.setValue("translate/hideSinks", self.bar.sinks_hidden)
        settings.setValue("translate/sentenceOnly", self.bar.span_only)
        settings.setValue("translate/sideBySide", self.bar.beside)

    def restore_settings(self, settings: QSettings) -> None:
        """What ``save_settings`` kept; a value the engine no longer offers is dropped when it is read back."""
        self._restored = stored(settings, "translate/quantity", ATTENTION)
        try:
            kept = json.loads(stored(settings, "translate/quantitySettings", "{}"))
        except ValueError:
            kept = {}
        self._settings = {k: dict(v) for k, v in kept.items() if isinstance(v, dict)} if isinstance(kept, dict) \
            else {}
        self.bar.sinks_check.setChecked(stored(settings, "translate/hideSinks", False))
        self.bar.span_check.setChecked(stored(settings, "translate/sentenceOnly", True))
        self.bar.beside_check.setChecked(stored(settings, "translate/sideBySide", False))

    def workers(self) -> tuple[Worker, ...]:
        """Its jobs on the model (the quantity, the logit lens, the suspect score): closing the window stops them."""
        return self.worker, self.lens.worker, self.suspect.worker

    @property
    def wanted(self) -> Quantity:
        """The quantity the selector shows."""
        q = next((q for q in self.quantities if q.key == self.bar.key), self.quantities[0])
        return q.with_settings(**self._settings.get(q.key, {}))

    def choose(self, key: str) -> None:
        """Show quantity ``key`` (tests, saved settings): as if picked in the selector."""
        self.bar.show_key(key)
        self._on_bar_chosen(key)

    def source(self) -> QuantitySource:
        return QuantitySource(self.document, self.result, sinks=not self.bar.sinks_hidden, span=self.bar.span_only)

    def _show_extras(self, step: int) -> None:
        """What goes with the panel's map (the panel follows the document itself): the map beside it and the
        quantity's shares in the output strip and the step table, as of ``step``."""
        self.panel.show_beside(self.beside_data(step) if self.bar.beside and self.result is not None else None)
        share = self.result.share if self.result is not None else None
        name = self.result.quantity.label if self.result is not None else ""
        self.output_view.set_shares(None if share is None else share[: step + 1].tolist(), name)
        found = self.result.parts if self.result is not None else None
        parts = None if found is None else [(float(a), float(b), float(c)) for a, b, c in found]
        if self.step_model.set_shares(None if share is None else [float(v) for v in share], name, parts) \
                and 0 <= step < self.step_model.rowCount():
            self.step_table.selectRow(step)  # a column more or less resets the table and its selection

    def export_extra(self) -> tuple[dict, dict] | None:
        """The arrays and sidecar entries an export adds for the quantity shown (None: attention)."""
        return None if self.result is None else export_fields(self.result, self.bar.sinks_hidden)

    def beside_data(self, step: int) -> HeatmapData | None:
        """The step's attention for the map beside: cross-attention (a language model's decoder self-attention),
        the panel's layer where it has one, mean of heads, sinks hidden as in the main map."""
        attention = QuantitySource(self.document, None, sinks=not self.bar.sinks_hidden, span=self.bar.span_only)
        kinds = [k for k in ("cross", "decoder") if k in attention.kinds()]
        if not kinds:
            return None
        view = attention.heatmap(kinds[0], self.panel.layer, None, step)
        if view is None:
            return None
        matrix, rows, cols, highlight = view
        info = attention.kind_info(kinds[0])
        layers = attention.maps(kinds[0], step)
        layer = min(self.panel.layer, layers.shape[0] - 1) if layers is not None else 0
        return HeatmapData(matrix, rows, cols, info.query_axis, info.key_axis,
                           f"Attention: {info.label} · layer {layer + 1} · mean of heads", highlight,
                           self.panel.per_map)

    def _refresh(self) -> None:
        """Show the quantity chosen: attention at once; another from the cache, or computed once the decode is done."""
        quantity, doc = self.wanted, self.document
        self._show_settings(quantity)
        if not quantity.computed or quantity.why_not:
            self._show(None)
            return
        if not doc.finished or not doc.steps or self.translator is None:
            self._show(None)
            self.status.emit(f"{quantity.label} is computed once the translation has finished; attention until then.")
            return
        translation = doc.translation(-1)
        key = cache_key(self.translator, translation, quantity)
        cached = self.cache.get(key)
        if cached is not None:
            self._show(cached)
        elif key != self._job_key or not self.worker.is_running():
            self._show(None)
            self._job_key = key
            self.bar.show_progress(0, 0, f"{quantity.label}...")
            self.worker.start(QuantityJob(self.translator, translation, quantity))

    def _show_settings(self, quantity: Quantity) -> None:
        """The settings menu of the method chosen (a foil among the step's other candidates), the corruption's line
        edit when it reads one; and the foil, where the top-k chart and the n-best list mark it (one state)."""
        self.bar.show_settings(setting_choices(quantity, self._candidates()) if quantity.method is not None else [])
        self.bar.show_corrupt("corrupt" in quantity.reads and not quantity.why_not, quantity.settings.get("corrupt"))
        foil = quantity.settings.get("foil")
        self.host.topk_view.set_foil(foil)
        self.host.search.panel.foil_now = foil

    def _candidates(self) -> list[str]:
        """The tokens the step shown could have taken instead: the foils the settings menu offers."""
        doc = self.document
        step = doc.steps[doc.current] if 0 <= doc.current < len(doc.steps) else None
        return [] if step is None else [token for token, _ in step.topk if token != step.token]

    def _show(self, result: QuantityResult | None) -> None:
        self.result = result
        self.panel.refresh()
        if self.document.encoder is not None:
            self._show_extras(self.document.current)

    @Slot(str)
    def contrast(self, foil: str) -> None:
        """Why the step's token and not ``foil``: a contrastive attribution of the method shown when it takes a
        foil, else of the first method that does."""
        current = self.wanted
        usable = [q for q in self.quantities if "foil" in q.reads and not q.why_not]
        method = current if "foil" in current.reads and not current.why_not else usable[0] if usable else None
        if method is None:
            self.status.emit("No contrastive attribution method is available for this model.")
            return
        self._settings.setdefault(method.key, {})["foil"] = foil
        self.bar.show_key(method.key)
        self._on_bar_chosen(method.key, keep=True)

    @Slot()
    def cancel(self) -> None:
        """Stop the computation; the map stays on attention."""
        running = self.worker.is_running()
        self.worker.cancel()
        self._job_key = None
        self.bar.idle()
        self.bar.show_key(ATTENTION)
        self._show(None)
        if running:
            self.status.emit("Cancelled: the map shows attention.")

    # -- events ------------------------------------------------------------------------------------------------------

    def _on_document_changed(self, change: DocumentChange) -> None:
        match change:
            case Cleared():
                if self.host.translator is not self.translator:  # another model (or none)
                    self.set_translator(self.host.translator)
                for settings in self._settings.values():
                    settings.pop("foil", None)  # a foil belongs to the step it was picked at
                self.worker.cancel()
                self._job_key = None
                self.bar.idle()
                self.result = None
                self._show_settings(self.wanted)
                self._show_extras(-1)
            case Encoded():
                self._show_extras(self.document.current)
            case PathShown():
                self._show_extras(self.document.current)
                if self.document.finished:
                    self._refresh()
            case Finished() if self.document.finished:
                self._refresh()
            case StepShown():
                self._show_settings(self.wanted)  # the foils offered are the step's candidates
                self._show_extras(self.document.current)

    @Slot(str)
    def _on_bar_chosen(self, key: str, keep: bool = False) -> None:
        self._restored = key  # the user's choice from now on
        if not keep:
            self._settings.get(key, {}).pop("foil", None)  # picked in the selector: no contrast
        if self.wanted.why_not:
            self.status.emit(f"{self.wanted.label} is not available for this model: {self.wanted.why_not}.")
            self.bar.show_key(ATTENTION)
        if self.worker.is_running():
            self.worker.cancel()
            self._job_key = None
            self.bar.idle()
        self._refresh()

    @Slot(str, object)
    def _on_bar_setting_changed(self, name: str, value: object) -> None:
        key = self.wanted.key
        if self._settings.get(key, {}).get(name) == value:
            return  # a line edit left unchanged
        why = refusal({**self._settings.get(key, {}), name: value})
        if why is not None:
            self.status.emit(why)
            return
        self._settings.setdefault(key, {})[name] = value
        if self.worker.is_running():
            self.worker.cancel()
            self._job_key = None
        self._refresh()

    @Slot()
    def _on_bar_options_changed(self) -> None:
        if self.bar.sinks_hidden:
            self.status.emit(WHY)
        self._show(self.result)

    @Slot(object)
    def _on_worker_produced(self, item: QuantityProgress | QuantityResult) -> None:
        if isinstance(item, QuantityProgress):
            self.bar.show_progress(item.done, item.total, item.text)
            return
        if self._job_key is not None:
            self.cache.put(self._job_key, item)
        if item.quantity.key == self.wanted.key:
            self._show(item)
            self.status.emit(f"{item.quantity.label}: every output token of the translation, teacher-forced. "
                             "Scrub to see each step's.")

    @Slot(object)
    def _on_worker_failed(self, failure: JobFailure) -> None:
        label, typed = self.wanted.label, any(name in TYPED for name in self.wanted.reads)
        self.bar.idle()
        if not typed:  # a typed setting (the corruption) stays chosen, to be corrected
            self.bar.show_key(ATTENTION)
        self._show(None)
        self.status.emit(f"{label} failed: {failure.text.splitlines()[0]}"
                         + (" Correct the corrupted source and press Enter." if typed else ""))

    @Slot()
    def _on_worker_finished(self) -> None:
        self._job_key = None
        self.bar.idle()
