"""The Translate tab's playback bar: step back / play / step forward, the step slider and its label, the speed and
its timer, Instant, and the maximum output length, each remembering its setting (the length per model: 20 tokens set
for an LLM must not cut the next model's sentences at 20).

It is a view and a controller of the tab's ``DecodeDocument``: it listens to it (the slider spans the steps of the
hypothesis shown and follows the step shown; while a decode runs, each new step is shown at once with Instant, else
the timer reveals the kept steps one by one at the chosen speed, stopping at the end) and moves the document's step
when the user scrubs, steps or plays.
"""

from __future__ import annotations

import json

from PySide6.QtCore import QSettings, Qt, QTimer, Slot
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QPushButton, QSlider, QSpinBox, QStyle, QWidget

from attnviz.engine.config import DecodeConfig
from attnviz.gui.widgets import named, stored
from attnviz.session.translate.changes import (
    Cleared,
    DocumentChange,
    Encoded,
    Finished,
    PathShown,
    StepAdded,
    StepShown,
)
from attnviz.session.translate.document import DecodeDocument

SPEEDS = {"Slow": 700, "Normal": 350, "Fast": 120, "Very fast": 40}  # milliseconds per token


MAX_LEN_TIP = ("Most output tokens per translation (<eos> included), remembered for each model; the model's position "
               "table may allow fewer")
MAX_LEN_KEY = "translate/maxLenByModel"  # JSON {model: length}, the most recently used models last
REMEMBERED_LENGTHS = 50


def length_setting(decode: DecodeConfig | None) -> str:
    """What raises the length limit of a decode run with ``decode``: the Max length box, which a model's own
    decoding (its generation_config.json, ``DecodeConfig.configured``) does not read."""
    if decode is not None and decode.configured:
        return (f"Max length, after choosing Greedy or Beam search in Decoding: the model's own decoding stops at "
                f"{decode.max_len} tokens")
    return "Max length"

def remembered_lengths(text: str) -> dict[str, int]:
    """The stored lengths per model; a setting that is not such a JSON object (edited by hand, an older version)
    gives none rather than an error."""
    try:
        found = json.loads(text) if text else {}
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    low, high = 1, 1000
    return {k: v for k, v in list(found.items())[-REMEMBERED_LENGTHS:]
            if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and low <= v <= high}


class PlaybackBar(QWidget):
    """Scrubbing through the decoded steps, and how the next translation is decoded and shown."""

    def __init__(self, document: DecodeDocument, parent: QWidget | None = None):
        super().__init__(parent)
        self.document = document
        style = self.style()
        self.back_button = named(QPushButton(), "backButton", "Step back", "Step back (Page Up)")
        self.back_button.setIcon(style.standardIcon(QStyle.StandardPixmap.SP_MediaSeekBackward))
        self.play_button = named(QPushButton(), "playButton", "Play or pause", "Play / pause (Ctrl+Space)")
        self.forward_button = named(QPushButton(), "forwardButton", "Step forward", "Step forward (Page Down)")
        self.forward_button.setIcon(style.standardIcon(QStyle.StandardPixmap.SP_MediaSeekForward))
        self.slider = named(QSlider(Qt.Orientation.Horizontal), "stepSlider", "Decoding step",
                            "Scrub through the decoding steps")
        self.slider.setRange(0, 0)
        self.slider.setMinimumWidth(60)  # at 1024 px the bar's other controls squeezed it to its handle
        self.step_label = QLabel("step 0 / 0")
        self.speed_combo = named(QComboBox(), "speedCombo", "Playback speed")
        self.speed_combo.addItems(list(SPEEDS))
        self.speed_label = QLabel("Spee&d")
        self.speed_label.setBuddy(self.speed_combo)
        self.instant_check = named(QCheckBox("&Instant"), "instantCheck", "Instant",
                                   "Show every step as soon as it is decoded")
        self.max_len_spin = named(QSpinBox(), "maxLenSpin", "Maximum output length", MAX_LEN_TIP)
        self.max_len_spin.setRange(1, 1000)
        self.max_len_spin.setValue(DecodeConfig().max_len)
        self.max_len_label = QLabel("Ma&x length")
        self.max_len_label.setBuddy(self.max_len_spin)
        self.max_lens: dict[str, int] = {}  # per model (its path or name): the length the user set for it
        self._model = ""  # the model whose length the box shows
        self.max_len_spin.valueChanged.connect(self._on_max_len_changed)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for w in (self.back_button, self.play_button, self.forward_button, self.slider, self.step_label,
                  self.speed_label, self.speed_combo, self.instant_check, self.max_len_label, self.max_len_spin):
            layout.addWidget(w)
        layout.setStretch(3, 1)
        self.timer = QTimer(self)  # reveals the next kept step
        self.speed_combo.currentTextChanged.connect(self._on_speed_changed)
        self._on_speed_changed(self.speed_combo.currentText())
        self.timer.timeout.connect(self._on_timer_timeout)
        self.play_button.clicked.connect(self.toggle_play)
        self.back_button.clicked.connect(self.step_back)
        self.forward_button.clicked.connect(self.step_forward)
        self.slider.valueChanged.connect(self.scrub_to)
        document.subscribe(self._on_document_changed)
        self.set_playing(False)

    @Slot(str)
    def _on_speed_changed(self, name: str) -> None:
        self.timer.setInterval(SPEEDS.get(name, 350))

    def use_model(self, model: str) -> None:
        """Show the length remembered for ``model`` (the default for one never given a length)."""
        self._model = ""  # the box's change below is the model's, not the user's
        self.max_len_spin.setValue(self.max_lens.get(model, DecodeConfig().max_len))
        self._model = model

    @Slot(int)
    def _on_max_len_changed(self, value: int) -> None:
        if self._model:
            self.max_lens.pop(self._model, None)  # the newest last: the oldest are forgotten first
            self.max_lens[self._model] = value
            while len(self.max_lens) > REMEMBERED_LENGTHS:
                self.max_lens.pop(next(iter(self.max_lens)))

    def save_settings(self, settings: QSettings) -> None:
        settings.setValue("translate/speed", self.speed_combo.currentText())
        settings.setValue("translate/instant", self.instant_check.isChecked())
        settings.setValue(MAX_LEN_KEY, json.dumps(self.max_lens))

    def restore_settings(self, settings: QSettings) -> None:
        speed = stored(settings, "translate/speed", "Normal")
        if speed in SPEEDS:
            self.speed_combo.setCurrentText(speed)
        self.instant_check.setChecked(stored(settings, "translate/instant", False))
        self.max_lens = remembered_lengths(stored(settings, MAX_LEN_KEY, ""))
        self.use_model(self._model)

    # -- playing -----------------------------------------------------------------------------------------------------

    def set_playing(self, playing: bool) -> None:
        (self.timer.start if playing else self.timer.stop)()
        icon = QStyle.StandardPixmap.SP_MediaPause if playing else QStyle.StandardPixmap.SP_MediaPlay
        self.play_button.setIcon(self.style().standardIcon(icon))
        self.play_button.setAccessibleDescription("playing" if playing else "paused")

    def decode_started(self, beam: bool) -> None:
        """A decode was asked: play its steps as they come, unless Instant shows them at once (or a beam search,
        whose hypothesis shown changes as it runs, is decoding)."""
        self.set_playing(not self.instant_check.isChecked() and not beam)

    @Slot()
    def toggle_play(self) -> None:
        doc = self.document
        if not doc.steps:
            return
        if not self.timer.isActive() and doc.current >= len(doc.steps) - 1:
            doc.go_to(0)  # replay from the start
        self.set_playing(not self.timer.isActive())

    @Slot()
    def _on_timer_timeout(self) -> None:
        doc = self.document
        if doc.request is not None and doc.current < len(doc.steps) - 1:
            doc.go_to(doc.current + 1)
        self._stop_at_end()

    def _stop_at_end(self) -> None:
        doc = self.document
        if doc.request is None or (doc.finished and doc.current >= len(doc.steps) - 1):
            self.set_playing(False)

    @Slot()
    def step_back(self) -> None:
        self.scrub_to(max(self.document.current - 1, 0))

    @Slot()
    def step_forward(self) -> None:
        self.scrub_to(min(self.document.current + 1, len(self.document.steps) - 1))

    @Slot(int)
    def scrub_to(self, step: int) -> None:
        """The user moved to ``step``: playback stops there."""
        self.set_playing(False)
        self.document.go_to(step)

    # -- following the document --------------------------------------------------------------------------------------

    def _on_document_changed(self, change: DocumentChange) -> None:
        doc = self.document
        match change:
            case Cleared():
                self.set_playing(False)
                self._span(0)
                self.step_label.setText("step 0 / 0")
            case StepAdded(index=index):
                self._span(index + 1)
                if self.instant_check.isChecked() or (doc.current < 0 and not self.timer.isActive()):
                    doc.go_to(index)
                else:
                    self._label()
            case PathShown():
                self._span(len(doc.steps))
                self._follow()
            case Encoded() | StepShown():
                self._follow()
            case Finished():
                self._stop_at_end()
                self._label()

    def _span(self, steps: int) -> None:
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(steps - 1, 0))
        self.slider.blockSignals(False)

    def _follow(self) -> None:
        self.slider.blockSignals(True)
        self.slider.setValue(max(self.document.current, 0))
        self.slider.blockSignals(False)
        self._label()

    def _label(self) -> None:
        doc = self.document
        self.step_label.setText(f"step {doc.current + 1} / {len(doc.steps)}" +
                                ("" if doc.request is None or doc.finished else " ..."))
