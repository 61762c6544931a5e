"""The Translate tab: type a sentence, watch it decode token by token, scrub through steps, explore attention.

With a language model loaded it becomes the Generate tab: the text typed is a prefix (possibly empty) that the
model continues, greedily or by sampling (temperature and seed, the seed advancing after each draw so that
pressing Generate again gives a new sample that can still be reproduced).

Decoding runs in the generic worker; each engine event lands in a ``DecodeSession`` (every step is kept, so
scrubbing back is instant). Playback reveals the kept steps at the chosen speed, or all at once with "Instant".
"""

from __future__ import annotations

from PySide6.QtCore import QSettings, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import DecodeStep, EncoderPass
from attnviz.engine.text.tokenize import LANGUAGE_NAMES
from attnviz.gui.attention.panel import AttentionPanel
from attnviz.gui.shortcuts import SentenceEdit
from attnviz.gui.translate.controls import PlaybackBar, SamplingRow, load_examples
from attnviz.gui.translate.explorer import SearchExplorer
from attnviz.gui.translate.mode import apply_mode_texts
from attnviz.gui.translate.session import DecodeSession, word_merger
from attnviz.gui.translate.step_model import StepTableModel
from attnviz.gui.translate.text import TranslationText, WarningList
from attnviz.gui.translate.tokens import TokenStrip, TopKView
from attnviz.gui.widgets import named
from attnviz.gui.worker import Worker


class TranslateTab(QWidget):
    status = Signal(str)
    mode_changed = Signal(str)  # "Translate" or "Generate", for the tab's title

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.translator = None
        self.session: DecodeSession | None = None
        self.current = -1  # the step shown; -1 = only the encoder pass
        self.worker = Worker(self)
        self.step_model = StepTableModel(self)
        self.examples = load_examples()
        self._build()
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
        self.sampling_combo, self.temperature_spin, self.seed_spin = (
            self.sampling_row.sampling_combo, self.sampling_row.temperature_spin, self.sampling_row.seed_spin)
        self.playback = PlaybackBar()
        for name in ("back_button", "play_button", "forward_button", "slider", "step_label", "speed_label",
                     "speed_combo", "instant_check", "max_len_spin", "max_len_label", "timer"):
            setattr(self, name, getattr(self.playback, name))
        self.message = WarningList()
        self.source_view = named(TokenStrip("Source tokens appear here"), "sourceView", "Source tokens",
                                 "Source tokens as the model reads them; hover one to see which outputs attended to "
                                 "it. Shading is relative to the largest weight of the row shown (the darkest is "
                                 "not necessarily near 1).")
        self.output_view = named(TokenStrip("The translation appears here, token by token"), "outputView",
                                 "Output tokens", "Output tokens; hover one to see its cross-attention on the source. "
                                 "Shading is relative to the largest weight.")
        self.translation_text = TranslationText()
        self.topk_view = TopKView()
        self.step_table = named(QTableView(), "stepTable", "Decoded steps")
        self.step_table.setModel(self.step_model)
        self.step_table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.step_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.step_table.verticalHeader().hide()
        self.attention = AttentionPanel()
        self.search = SearchExplorer(self)  # the step table, search tree and heads-off pages
        self._build_layout()

    def _build_layout(self) -> None:
        entry = QHBoxLayout()
        for w in (self.lang_label, self.source_edit, self.examples_combo, self.translate_button):
            entry.addWidget(w)
        entry.setStretch(1, 1)
        tokens = QVBoxLayout()
        self.source_title, self.output_title = QLabel("<b>Source</b>"), QLabel("<b>Translation</b>")
        for title, view in ((self.source_title, self.source_view), (self.output_title, self.output_view)):
            tokens.addWidget(title)
            tokens.addWidget(view)
        tokens.addWidget(self.translation_text)
        tokens.addWidget(self.playback)
        tokens.addWidget(self.search.side, 1)  # steps, search tree, heads off
        token_box = QWidget()
        token_box.setLayout(tokens)
        tokens.setContentsMargins(0, 0, 0, 0)
        top = QSplitter(Qt.Orientation.Horizontal)  # the top-k chart can be widened
        top.setObjectName("translateTopSplitter")
        for widget, stretch in ((token_box, 5), (self.topk_view, 2)):
            top.addWidget(widget)
            top.setStretchFactor(top.indexOf(widget), stretch)
        top.setChildrenCollapsible(False)
        self.step_table.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        self.top_splitter = top
        self.splitter = splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.setObjectName("translateSplitter")
        splitter.addWidget(top)
        splitter.addWidget(self.attention)
        splitter.setStretchFactor(0, 1)  # the top holds the search tree too
        splitter.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(entry)
        layout.addWidget(self.sampling_row)
        layout.addWidget(self.message)
        layout.addWidget(splitter, 1)

    def _connect(self) -> None:
        self.search.side.currentChanged.connect(lambda index: self.search.make_room(self.splitter, index))
        self.source_edit.returnPressed.connect(self.translate)
        self.translate_button.clicked.connect(self.translate)
        self.examples_combo.activated.connect(self._on_examples_activated)
        self.worker.event.connect(self._on_worker_event)
        self.worker.failed.connect(self._on_worker_failed)
        self.worker.finished.connect(self._on_worker_finished)
        self.timer.timeout.connect(self._on_timer_timeout)
        self.play_button.clicked.connect(self.toggle_play)
        self.back_button.clicked.connect(self.step_back)
        self.forward_button.clicked.connect(self.step_forward)
        self.slider.valueChanged.connect(self._on_slider_value_changed)
        self.output_view.hovered.connect(self._on_output_hovered)
        self.output_view.clicked.connect(self.go_to)
        self.source_view.hovered.connect(self._on_source_hovered)
        self.attention.selection_changed.connect(self._on_attention_selection_changed)
        self.step_table.clicked.connect(self._on_step_table_clicked)
        self._set_playing(False)

    # -- model and settings ------------------------------------------------------------------------------------------

    @property
    def generating(self) -> bool:
        """True when the model is a language model: it continues a prefix instead of translating."""
        return self.translator is not None and not self.translator.has_source

    def set_translator(self, translator) -> None:
        self.worker.cancel()
        self.translator = translator
        card = translator.card if translator is not None else None
        self.attention.alignment_head = card.alignment_head if card is not None else None
        lang = translator.src_spec.lang if translator else ""
        language = LANGUAGE_NAMES.get(lang, lang)
        generating = self.generating
        apply_mode_texts(self, generating, language, translator is not None)
        for w in (self.source_title, self.source_view, self.examples_combo):
            w.setVisible(not generating)
        self.sampling_row.set_generating(generating)
        self.search.set_translator(translator)
        self.examples_combo.clear()
        self.examples_combo.addItem("Examples...")
        self.examples_combo.addItems(self.examples.get(lang, []))
        for w in (self.translate_button, self.source_edit, self.examples_combo):
            w.setEnabled(translator is not None)
        if translator is not None and QApplication.focusWidget() is None:
            self.source_edit.setFocus()  # at start-up only: a model chosen in the picker leaves the focus there
        self._reset()
        self._show_message("")  # the old model's warnings do not describe the new one
        self.mode_changed.emit("Generate" if generating else "Translate")

    def save_settings(self, settings: QSettings) -> None:
        self.playback.save_settings(settings)
        self.sampling_row.save_settings(settings)
        settings.setValue("translate/kind", self.attention.kind or "")
        settings.setValue("translate/layer", -1 if self.attention.chosen_layer is None else self.attention.chosen_layer)
        settings.setValue("translate/head", self.attention.chosen_head)
        settings.setValue("translate/splitter", self.splitter.saveState())
        settings.setValue("translate/top_splitter", self.top_splitter.saveState())

    def restore_settings(self, settings: QSettings) -> None:
        for splitter, key in ((self.splitter, "translate/splitter"), (self.top_splitter, "translate/top_splitter")):
            state = settings.value(key)
            if state is not None:
                splitter.restoreState(state)
        self.playback.restore_settings(settings)
        self.sampling_row.restore_settings(settings)
        self.attention.restore_choice(settings.value("translate/kind", "") or None,
                                      settings.value("translate/layer", -1, type=int),
                                      settings.value("translate/head", 0, type=int))

    # -- decoding ----------------------------------------------------------------------------------------------------

    @Slot()
    def translate(self) -> None:
        text = self.source_edit.text()
        if self.translator is None:
            self._show_message("No model is loaded yet: wait for it, or open a checkpoint (File > Open).")
            return
        if not text.strip() and not self.generating:
            self._show_message("Type a sentence to translate first.")
            return
        self._show_message("")
        self._reset()
        translator, decode, beam = self.translator, self._decode_config(), self.sampling_row.mode == "beam"
        self.session = DecodeSession(translator.detokenize, word_merger(translator))
        self.worker.start(self.search.job(translator, text, decode, beam))
        self._set_playing(not self.instant_check.isChecked() and not beam)
        self.status.emit("Generating..." if self.generating else "Translating...")

    def _decode_config(self) -> DecodeConfig:
        """The decoding settings of this run; a sampled one advances the seed for the next."""
        return self.sampling_row.drawn(self.search.config(DecodeConfig(max_len=self.max_len_spin.value())))

    @Slot(object)
    def _on_worker_event(self, event) -> None:
        if self.session is None or self.search.add(event):
            return  # beam events: the explorer shows them
        self.session.add(event)
        if isinstance(event, EncoderPass):
            self.source_view.set_tokens(event.src_tokens)
            self.message.set_messages(event.warnings)  # every warning, not only the last
            self.render()
        elif isinstance(event, DecodeStep):
            self.step_model.append(event)
            self.slider.blockSignals(True)
            self.slider.setRange(0, len(self.session.steps) - 1)
            self.slider.blockSignals(False)
            if self.instant_check.isChecked() or (self.current < 0 and not self.timer.isActive()):
                self.go_to(len(self.session.steps) - 1)
            else:
                self._update_step_label()

    @Slot(str)
    def _on_worker_failed(self, message: str) -> None:
        self._set_playing(False)
        self._show_message(message)
        self.status.emit("Translation failed")

    @Slot()
    def _on_worker_finished(self) -> None:
        if self.session is not None:
            self.session.finished = True
            self.search.decoded()
            self._stop_at_end()
            self._show_text()
            verb = "Generated" if self.generating else "Translated"
            self.status.emit(f"{verb}: {len(self.session.steps)} tokens. Scrub or hover to explore.")
            self._update_step_label()

    # -- playback ----------------------------------------------------------------------------------------------------

    @Slot()
    def toggle_play(self) -> None:
        if not self.session or not self.session.steps:
            return
        if not self.timer.isActive() and self.current >= len(self.session.steps) - 1:
            self.go_to(0)  # replay from the start
        self._set_playing(not self.timer.isActive())

    def _set_playing(self, playing: bool) -> None:
        self.playback.set_playing(playing)

    @Slot()
    def _on_timer_timeout(self) -> None:
        if self.session is not None and self.current < len(self.session.steps) - 1:
            self.go_to(self.current + 1)
        self._stop_at_end()

    def _stop_at_end(self) -> None:
        if self.session is None or (self.session.finished and self.current >= len(self.session.steps) - 1):
            self._set_playing(False)

    @Slot()
    def step_back(self) -> None:
        self._set_playing(False)
        self.go_to(max(self.current - 1, 0))

    @Slot()
    def step_forward(self) -> None:
        self._set_playing(False)
        if self.session:
            self.go_to(min(self.current + 1, len(self.session.steps) - 1))

    @Slot(int)
    def go_to(self, step: int) -> None:
        if self.session is None or not self.session.steps:
            return
        self.current = max(0, min(step, len(self.session.steps) - 1))
        self.render()

    @Slot(int)
    def _on_slider_value_changed(self, value: int) -> None:
        self._set_playing(False)
        self.go_to(value)

    # -- rendering ---------------------------------------------------------------------------------------------------

    def render(self) -> None:
        session = self.session
        if session is None or session.encoder is None:
            return
        steps = session.steps[: self.current + 1] if self.current >= 0 else []
        self.output_view.set_tokens([s.token for s in steps], self.current)
        self.source_view.set_weights(None)
        step = steps[-1] if steps else None
        self.topk_view.set_candidates(step.topk if step else [], step.entropy if step else None,
                                      (step.token, step.probability) if step else None)
        self._show_text()
        self.slider.blockSignals(True)
        self.slider.setValue(max(self.current, 0))
        self.slider.blockSignals(False)
        if 0 <= self.current < self.step_model.rowCount():
            self.step_table.selectRow(self.current)
        self._update_step_label()
        self.attention.display(session, self.current)
        self._shade_source_by(self.current)

    def _show_text(self) -> None:
        """The translation as text: the whole one once decoded (scrubbing does not change it), else so far."""
        session = self.session
        if session is None or not session.steps:
            self.translation_text.set_text("", finished=False)
            return
        steps = session.steps if session.finished else session.steps[: self.current + 1]
        self.translation_text.set_text(self.translator.detokenize([s.token for s in steps]) if self.translator
                                       else " ".join(s.token for s in steps), session.finished)

    def _update_step_label(self) -> None:
        total = len(self.session.steps) if self.session else 0
        self.step_label.setText(f"step {self.current + 1} / {total}" + ("" if not self.session or
                                                                          self.session.finished else " ..."))

    def _shade_source_by(self, step: int) -> None:
        row = self.session.cross_row(step, self.attention.layer, self.attention.head) if self.session else None
        self.source_view.set_weights(None if row is None else row / max(float(row.max()), 1e-9))

    @Slot(int)
    def _on_output_hovered(self, index: int) -> None:
        self._shade_source_by(index if index >= 0 else self.current)

    @Slot(int)
    def _on_source_hovered(self, index: int) -> None:
        column = self.session.cross_column(index, self.current, self.attention.layer, self.attention.head) \
            if self.session and index >= 0 else None
        self.output_view.set_weights(None if column is None else column / max(float(column.max()), 1e-9))

    @Slot()
    def _on_attention_selection_changed(self) -> None:
        self._shade_source_by(self.current)

    @Slot(object)
    def _on_step_table_clicked(self, index) -> None:
        self._set_playing(False)
        self.go_to(index.row())

    @Slot(int)
    def _on_examples_activated(self, index: int) -> None:
        if index > 0:
            self.source_edit.setText(self.examples_combo.itemText(index))
            self.examples_combo.setCurrentIndex(0)
            self.translate()

    def _reset(self) -> None:
        self._set_playing(False)
        self.session, self.current = None, -1
        self.step_model.set_steps([])
        self.slider.setRange(0, 0)
        self.source_view.set_tokens([])
        self.output_view.set_tokens([])
        self.topk_view.set_candidates([], None)
        self.translation_text.set_text("", finished=False)
        self.attention.display(None, -1)
        self.step_label.setText("step 0 / 0")

    def _show_message(self, text: str) -> None:
        self.message.set_messages([text] if text else [])

    def current_translation(self):
        """The whole translation decoded so far (for export), or None."""
        return self.session.translation(-1) if self.session and self.session.steps else None
