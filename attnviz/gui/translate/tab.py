"""The Translate tab: type a sentence, watch it decode token by token, scrub through steps, explore attention.

With a language model it becomes the Generate tab: the text typed is a prefix (possibly empty) the model continues,
greedily or sampled (temperature and seed; the seed advances after each draw, and every sample can be reproduced).

Decoding runs in the generic worker; each event lands in the tab's ``DecodeDocument`` (every step is kept, so scrubbing
back is instant), which every view reads and listens to: the token strips, text and top-k chart (``StepViews``), the
playback bar, the step table (``StepTableModel``), the attention panel (fed attention or an attribution by
``QuantityControl``) and the search explorer (``SearchExplorer``: search tree, what-if branches, heads off), which
asks the tab only what its ``ExplorerHost`` offers. Playback reveals the kept steps at the chosen speed, or all at
once with "Instant".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QModelIndex, QSettings, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from attnviz.engine.checkpoints.memory import size_text
from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import Translation
from attnviz.engine.heads import HeadRef
from attnviz.engine.search.tree import SearchEvent
from attnviz.engine.text.tokenize import LANGUAGE_NAMES, MULTILINGUAL
from attnviz.gui.attention.panel import AttentionPanel
from attnviz.gui.shortcuts import SentenceEdit
from attnviz.gui.translate.controls import SamplingRow, load_examples
from attnviz.gui.translate.explorer import SearchExplorer
from attnviz.gui.translate.languages import LanguagePicker
from attnviz.gui.translate.layout import TranslateLayout
from attnviz.gui.translate.loading import LoadingGate
from attnviz.gui.translate.playback import MAX_LEN_TIP, PlaybackBar, length_setting
from attnviz.gui.translate.quantity_control import QuantityControl
from attnviz.gui.translate.step_model import SHARE, StepTableModel
from attnviz.gui.translate.step_views import StepViews
from attnviz.gui.translate.text import WarningList
from attnviz.gui.widgets import compact_rows, copyable, named, stored
from attnviz.gui.worker import JobFailure, Worker
from attnviz.session.translate.changes import DocumentChange, Encoded, Finished, PathShown, StepShown
from attnviz.session.translate.cut_views import word_merger
from attnviz.session.translate.document import DecodeDocument, DecodeRequest
from attnviz.session.translate.jobs import DecodeJob
from attnviz.session.translate.mode import ModeTexts, mode_texts

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator


class TranslateTab(QWidget):
    status = Signal(str)
    mode_changed = Signal(str)  # "Translate" or "Generate", for the tab's title
    view_chosen = Signal(object)  # a view of the model with other request settings (its languages)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.translator: Translator | None = None
        self.document = DecodeDocument()  # the decode shown; listeners hear of changes in the order they subscribe
        self.worker = Worker(self)
        self.step_model = StepTableModel(self.document, self)
        self.examples = load_examples()
        self._build()  # the search explorer and the playback bar subscribe there, after the step table
        self.document.subscribe(self._on_document_changed)
        self.document.subscribe(self.step_views.on_document_changed)  # after the panel settles on the step
        self._connect()
        self.set_translator(None)

    # -- construction ------------------------------------------------------------------------------------------------

    def _build(self) -> None:
        self.lang_label = QLabel("Source")
        self.source_edit = named(SentenceEdit(), "sourceEdit", "Sentence to translate",
                                 "Type a sentence and press Enter")
        self.source_edit.setClearButtonEnabled(True)
        self.lang_label.setBuddy(self.source_edit)
        self.examples_combo = named(QComboBox(), "examplesCombo", "Example sentences")
        self.translate_button = named(QPushButton("Tr&anslate"), "translateButton", "Translate",
                                      "Translate the sentence (Enter)")
        self.sampling_row = SamplingRow()
        self.languages = LanguagePicker()  # a multilingual model's source and target languages
        self.languages.chosen.connect(self.view_chosen)
        self.sampling_combo, self.temperature_spin, self.seed_spin = (
            self.sampling_row.sampling_combo, self.sampling_row.temperature_spin, self.sampling_row.seed_spin)
        self.playback = PlaybackBar(self.document)
        self.sampling_combo.currentIndexChanged.connect(self._on_decoding_chosen)
        self.message = WarningList()
        self.attention = AttentionPanel()
        self.step_views = StepViews(self.document, self.attention, self)  # token strips, text, top-k
        self.source_view, self.output_view = self.step_views.source_view, self.step_views.output_view
        self.translation_text, self.topk_view = self.step_views.translation_text, self.step_views.topk_view
        self.step_table = compact_rows(copyable(named(QTableView(), "stepTable", "Decoded steps",
                                         "The decoded steps; Ctrl+C copies the selected rows with the titles")))
        self.step_table.setModel(self.step_model)
        self.step_table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        header = self.step_table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Stretch)  # the side column's width, shared out
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setResizeContentsPrecision(0)  # the rows in view: all of them made each new step O(steps)
        self.step_model.modelReset.connect(self._on_step_columns_reset)
        header.setTextElideMode(Qt.TextElideMode.ElideRight)  # a narrow column ends its title in "…"
        self.step_table.verticalHeader().hide()
        self.step_table.setWordWrap(False)  # one line a step: the side column is narrow
        self.search = SearchExplorer(self.document, self, self.step_table, self)  # steps, tree, heads-off pages
        self.quantity = QuantityControl(self)  # what the map shows: attention, a contribution, an attribution
        self.gate = LoadingGate(self.lang_label, self.translate_button, self.examples_combo, self.source_edit)
        self._build_layout()

    def _build_layout(self) -> None:
        entry = QHBoxLayout()
        for w in (self.lang_label, self.source_edit, self.examples_combo, self.translate_button, self.sampling_row):
            entry.addWidget(w)
        entry.setStretch(1, 1)
        self.layout_state = TranslateLayout(self.attention, self.playback, self.step_views.tokens_box(),
                                            self.translation_text, self.topk_view, self.search.side,
                                            self.search.page_need, self.quantity.suspect)
        self.splitter, self.side_splitter = self.layout_state.main, self.layout_state.side
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(entry)
        layout.addWidget(self.languages)  # a row of its own (shown for a multilingual model): the entry row is full
        layout.addWidget(self.message)
        layout.addWidget(self.splitter, 1)

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self.layout_state.fit(self.width(), self.height())

    def _connect(self) -> None:
        self.search.side.currentChanged.connect(self._on_side_page_changed)
        self.source_edit.returnPressed.connect(self.translate)
        self.translate_button.clicked.connect(self.translate)
        self.examples_combo.activated.connect(self._on_examples_activated)
        self.worker.batched.connect(self._on_worker_batched)  # the events that arrived together: one redraw
        self.worker.failed.connect(self._on_worker_failed)
        self.worker.finished.connect(self._on_worker_finished)
        self.output_view.clicked.connect(self.go_to)
        self.topk_view.alternative.connect(self.search.what_if)
        self.attention.head_toggled.connect(self.search.toggle_head)
        self.step_table.clicked.connect(self._on_step_table_clicked)
        span = self.quantity.bar.span_check  # the Source strip follows Prompt: sentence only
        self.step_views.set_fold(span.isChecked())
        span.toggled.connect(self.step_views.set_fold)

    # -- model and settings ------------------------------------------------------------------------------------------

    @property
    def generating(self) -> bool:
        """True when the model is a language model: it continues a prefix instead of translating."""
        return self.translator is not None and not self.translator.has_source

    def _show_mode(self, texts: ModeTexts) -> None:
        """The mode's words on the tab's widgets (the input's label and the button's: ``LoadingGate.show``)."""
        self.source_edit.setPlaceholderText(texts.placeholder)
        self.source_edit.setAccessibleName(texts.source_name)
        self.step_views.show_mode(texts, self.generating)
        self.attention.heatmap.placeholder = texts.heatmap_placeholder

    def set_translator(self, translator: Translator | None) -> None:
        self.worker.cancel()
        self.translator = translator
        card = translator.card if translator is not None else None
        self.attention.alignment_head = card.alignment_head if card is not None else None
        if card is not None:
            self.playback.use_model(str(card.path or card.name))  # its own Max length, or the default
        lang = translator.src_spec.lang if translator else ""
        language = LANGUAGE_NAMES.get(lang, "" if lang == MULTILINGUAL else lang)
        generating = self.generating
        self._texts = mode_texts(generating, language, translator is not None)
        self._show_mode(self._texts)
        self.examples_combo.setVisible(not generating)
        self.sampling_row.set_generating(generating)
        self.sampling_row.set_configured(card.decoding if card else None, card.decoding_label() if card else None)
        self._on_decoding_chosen()
        self.languages.set_translator(translator)
        self.search.set_translator(translator)
        self.examples_combo.clear()
        self.examples_combo.addItem("Examples...")
        self.examples_combo.addItems(self.examples.get(lang, []))
        pending = self.gate.take()
        self.set_loading(None)
        if translator is not None and QApplication.focusWidget() is None:
            self.source_edit.setFocus()  # at start-up only: a model chosen in the picker leaves the focus there
        self.document.reset()
        self.show_message("")  # the old model's warnings do not describe the new one
        self.mode_changed.emit("Generate" if generating else "Translate")
        if pending and translator is not None:
            self.translate()

    def set_loading(self, name: str | None) -> None:
        """The window is loading the model ``name`` (None: no more; see ``LoadingGate``)."""
        self.gate.show(self._texts, self.translator is not None, name)

    def save_settings(self, settings: QSettings) -> None:
        self.playback.save_settings(settings)
        self.sampling_row.save_settings(settings)
        settings.setValue("translate/kind", self.attention.kind or "")
        settings.setValue("translate/layer", -1 if self.attention.chosen_layer is None else self.attention.chosen_layer)
        settings.setValue("translate/head", self.attention.chosen_head)
        self.layout_state.save(settings)
        self.quantity.save_settings(settings)

    def restore_settings(self, settings: QSettings) -> None:
        self.layout_state.restore(settings)
        self.playback.restore_settings(settings)
        self.sampling_row.restore_settings(settings)
        self.quantity.restore_settings(settings)
        self.attention.restore_choice(stored(settings, "translate/kind", "") or None,
                                      stored(settings, "translate/layer", -1), stored(settings, "translate/head", 0))

    # -- decoding ----------------------------------------------------------------------------------------------------

    @Slot()
    def translate(self) -> None:
        text, translator = self.source_edit.text(), self.translator
        if waiting := self.gate.hold():
            return self.status.emit(waiting)
        if translator is None:
            self.show_message("No model is loaded yet: wait for it, or open a checkpoint (File > Open).")
            return
        if not text.strip() and not self.generating:
            self.show_message("Type a sentence to translate first.")
            return
        self.show_message("")
        request = DecodeRequest(text, self._decode_config(), beam := self.sampling_row.mode == "beam")
        self.document.start(request, translator.detokenize, word_merger(translator.src_spec, translator.tgt_spec),
                            (translator.kind, translator.config))
        self.worker.start(DecodeJob(translator, request))
        self.playback.decode_started(beam)
        self.status.emit("Generating..." if self.generating else "Translating...")

    def _length_setting(self) -> str:
        request = self.document.request
        return length_setting(None if request is None else request.decode)

    @Slot()
    def _on_decoding_chosen(self) -> None:
        """A model's own decoding has its own length limit: the Max length box is off while it is chosen, and says
        why."""
        own = self.sampling_row.configured if self.sampling_row.uses_configured() else None
        spin = self.playback.max_len_spin
        spin.setEnabled(own is None)
        spin.setToolTip(MAX_LEN_TIP if own is None else f"The model's own decoding stops at {own.max_len} tokens "
                        "(its generation_config.json); choose Greedy or Beam search in Decoding to set Max length")

    def _decode_config(self) -> DecodeConfig:
        """The decoding settings of this run; a sampled one advances the seed for the next."""
        return self.sampling_row.drawn(self.search.config(DecodeConfig(max_len=self.playback.max_len_spin.value())))

    @Slot(object)
    def _on_worker_batched(self, events: list[SearchEvent]) -> None:
        self.document.add_all(events)

    @Slot(object)
    def _on_worker_failed(self, failure: JobFailure) -> None:
        self.playback.set_playing(False)
        self.show_message(failure.text)
        self.status.emit("Translation failed")

    @Slot()
    def _on_worker_finished(self) -> None:
        if self.document.request is not None:
            self.document.finish()
            verb = "Generated" if self.generating else "Translated"
            limit = self.document.stopped_at_limit(self.translator.model.max_target_len) if self.translator else None
            after = (f" Stopped at the length limit of {limit} tokens: raise {self._length_setting()} to "
                     "let it finish." if limit else " Scrub or hover to explore.")
            size, precision = self.document.kept_maps()
            kept = f" Attention kept: {size_text(size)} ({precision})." if precision != "float32" or size >= 2**24 \
                else ""  # an LLM's (float16), or maps large enough to matter
            self.status.emit(f"{verb}: {len(self.document.steps)} tokens.{kept}{after}")

    def _on_document_changed(self, change: DocumentChange) -> None:
        """The tab's own part of a change: the step table's row for the step, the warnings,
        the side column's room (the step views follow the document themselves, after this)."""
        match change:
            case Encoded(encoder=encoder):
                self.message.set_messages(encoder.warnings)  # every warning, not only the last
                self.render_step()
            case PathShown() | StepShown():
                self.render_step()
                self._show_warnings()
            case Finished():
                self.layout_state.fit_side()  # the token strips may need more rows now
                self._show_warnings()

    def _show_warnings(self) -> None:
        """The input's warnings and, once finished, whether the hypothesis shown was cut at Max length."""
        if self.translator is not None and self.document.finished:
            setting = self._length_setting()
            self.message.set_messages(self.document.warnings(self.translator.model.max_target_len, setting))
            self.step_model.mark_limit(self.document.stopped_at_limit(self.translator.model.max_target_len), setting)

    # -- what the search explorer may ask (ExplorerHost) -------------------------------------------------------------

    def decoding(self) -> bool:
        return self.worker.is_running()

    def waiting(self) -> str:
        return self.gate.waiting()

    def pause(self) -> None:
        self.playback.set_playing(False)

    def show_message(self, text: str) -> None:
        self.message.set_messages([text] if text else [])

    def show_status(self, text: str) -> None:
        self.status.emit(text)

    def redecode(self, text: str) -> None:
        self.source_edit.setText(text)
        self.translate()  # cancels a running decode

    def show_heads_off(self, heads: tuple[HeadRef, ...], redraw: bool) -> None:
        self.attention.heads_off = heads
        if redraw:
            self.attention.redraw()

    @Slot(int)
    def go_to(self, step: int) -> None:
        """Show step ``step`` (an output token clicked, a menu's first or last step)."""
        self.document.go_to(step)

    # -- rendering ---------------------------------------------------------------------------------------------------

    def render_step(self) -> None:
        """The step table's row for the document's step (the map and the step views follow the document)."""
        current = self.document.current
        if self.document.encoder is not None and 0 <= current < self.step_model.rowCount():
            self.step_table.selectRow(current)

    @Slot()
    def _on_step_columns_reset(self) -> None:
        """The Source share column, when shown, takes the width its figures need ("14·42·44"), the others share
        the rest: stretched with them, an LLM's three shares were elided to nothing in the narrow side column."""
        header = self.step_table.horizontalHeader()
        for column in range(1, self.step_model.columnCount()):
            share = self.step_model.columns()[column] == SHARE
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents if share
                                        else QHeaderView.ResizeMode.Stretch)

    @Slot(QModelIndex)
    def _on_step_table_clicked(self, index: QModelIndex) -> None:
        self.playback.scrub_to(index.row())

    @Slot(int)
    def _on_side_page_changed(self, index: int) -> None:
        self.layout_state.fit_side()  # the page opened gets its rows

    @Slot(int)
    def _on_examples_activated(self, index: int) -> None:
        if index > 0:
            self.source_edit.setText(self.examples_combo.itemText(index))
            self.examples_combo.setCurrentIndex(0)
            self.translate()

    def current_translation(self) -> Translation | None:
        """The whole translation decoded so far (for export), or None."""
        return self.document.translation(-1) if self.document.steps else None
