"""The Translate tab's decoding controls: the decoding row (greedy; sampled, in Generate mode, with temperature and
seed; or beam search with its width and length penalty) and the playback bar (step back / play / step forward, the
step slider, speed and its timer, Instant, maximum output length), each remembering its own settings; and the
example sentences the tab offers.

Plain widgets that hold their controls; the tab connects and reads them.
"""

from __future__ import annotations

import json

from PySide6.QtCore import QSettings, Qt, QTimer, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QSpinBox,
    QStyle,
    QWidget,
)

from attnviz.engine.config import DecodeConfig
from attnviz.gui.widgets import named
from attnviz.paths import resources_dir

SPEEDS = {"Slow": 700, "Normal": 350, "Fast": 120, "Very fast": 40}  # milliseconds per token


def load_examples() -> dict[str, list[str]]:
    """The example sentences of each source language (resources/examples.json)."""
    try:
        return json.loads((resources_dir() / "examples.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


MODES = ("greedy", "sampled", "beam")


class SamplingRow(QWidget):
    """How the next decode searches: greedy (the most probable token each step), sampled at a temperature from a
    seed (offered for a language model, as before), or beam search (width 1-12, GNMT length penalty alpha)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.sampling_combo = named(QComboBox(), "samplingCombo", "Decoding",
                                    "Greedy: always the most probable token; Sampled: drawn from the softmax (language "
                                    "models); Beam search: the best of several hypotheses, shown as a tree")
        self.sampling_combo.addItems(["Greedy", "Sampled", "Beam search"])
        self.temperature_spin = named(QDoubleSpinBox(), "temperatureSpin", "Temperature",
                                      "Sampling temperature: below 1 sharper, above 1 flatter")
        self.temperature_spin.setRange(0.05, 5.0)
        self.temperature_spin.setSingleStep(0.1)
        self.temperature_spin.setValue(1.0)
        self.seed_spin = named(QSpinBox(), "seedSpin", "Seed", "Seed of the sampling; it advances after each sample")
        self.seed_spin.setRange(0, 2**31 - 1)
        self.beam_spin = named(QSpinBox(), "beamWidthSpin", "Beam width", "Hypotheses kept at each step (1-12)")
        self.beam_spin.setRange(1, 12)
        self.beam_spin.setValue(5)
        self.penalty_spin = named(QDoubleSpinBox(), "lengthPenaltySpin", "Length penalty",
                                  "GNMT length penalty alpha: finished hypotheses rank by score / ((5 + length) / 6) "
                                  "** alpha; 0 ranks by the summed log-probability alone")
        self.penalty_spin.setRange(0.0, 3.0)
        self.penalty_spin.setSingleStep(0.1)
        self.penalty_spin.setValue(DecodeConfig().length_penalty)
        self.decoding_label = QLabel("Decodin&g")
        self.decoding_label.setBuddy(self.sampling_combo)
        self.sample_labels = (QLabel("Temperature"), QLabel("Seed"))
        self.beam_labels = (QLabel("Width"), QLabel("Length penalty"))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for w in (self.decoding_label, self.sampling_combo, self.sample_labels[0], self.temperature_spin,
                  self.sample_labels[1], self.seed_spin, self.beam_labels[0], self.beam_spin, self.beam_labels[1],
                  self.penalty_spin):
            layout.addWidget(w)
        layout.addStretch(1)
        self.extra = QHBoxLayout()  # the tab adds the heads-off summary here
        layout.addLayout(self.extra)
        self.generating = True
        self.sampling_combo.currentIndexChanged.connect(self._on_sampling_changed)
        self._on_sampling_changed(0)

    @property
    def mode(self) -> str:
        return MODES[max(self.sampling_combo.currentIndex(), 0)]

    def set_generating(self, generating: bool) -> None:
        """Sampling is offered for a language model only; a translation model that was sampling turns greedy."""
        self.generating = generating
        self.sampling_combo.model().item(1).setEnabled(generating)
        if not generating and self.mode == "sampled":
            self.sampling_combo.setCurrentIndex(0)
        self._on_sampling_changed(self.sampling_combo.currentIndex())

    @Slot(int)
    def _on_sampling_changed(self, index: int) -> None:
        for w in (self.temperature_spin, self.seed_spin, *self.sample_labels):
            w.setEnabled(index == 1)
            w.setVisible(self.generating)
        for w in (self.beam_spin, self.penalty_spin, *self.beam_labels):
            w.setEnabled(index == 2)

    def drawn(self, decode: DecodeConfig) -> DecodeConfig:
        """``decode`` greedy, sampled or beam as chosen; a sample takes the seed and advances it for the next one."""
        if self.mode == "beam":
            return decode.replace(beam=self.beam_spin.value(), length_penalty=self.penalty_spin.value())
        if self.mode == "greedy":
            return decode
        seed = self.seed_spin.value()
        self.seed_spin.setValue((seed + 1) % (2**31))
        return decode.replace(temperature=self.temperature_spin.value(), seed=seed)

    def save_settings(self, settings: QSettings) -> None:
        settings.setValue("generate/sampled", self.mode == "sampled")
        settings.setValue("decode/mode", self.mode)
        settings.setValue("decode/beam", self.beam_spin.value())
        settings.setValue("decode/length_penalty", self.penalty_spin.value())
        settings.setValue("generate/temperature", self.temperature_spin.value())
        settings.setValue("generate/seed", self.seed_spin.value())

    def restore_settings(self, settings: QSettings) -> None:
        sampled = settings.value("generate/sampled", True, type=bool)
        mode = settings.value("decode/mode", "sampled" if sampled else "greedy")
        self.sampling_combo.setCurrentIndex(MODES.index(mode) if mode in MODES else 0)
        if mode == "sampled" and not self.generating:
            self.sampling_combo.setCurrentIndex(0)
        self.beam_spin.setValue(settings.value("decode/beam", 5, type=int))
        self.penalty_spin.setValue(settings.value("decode/length_penalty", DecodeConfig().length_penalty, type=float))
        self.temperature_spin.setValue(settings.value("generate/temperature", 1.0, type=float))
        self.seed_spin.setValue(settings.value("generate/seed", 0, type=int))


class PlaybackBar(QWidget):
    """Scrubbing through the decoded steps, and how the next translation is decoded and shown."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
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
        self.max_len_spin = named(QSpinBox(), "maxLenSpin", "Maximum output length",
                                  "Most output tokens per translation (<eos> included); the model's position table "
                                  "may allow fewer")
        self.max_len_spin.setRange(1, 1000)
        self.max_len_spin.setValue(DecodeConfig().max_len)
        self.max_len_label = QLabel("Max length")
        self.max_len_label.setBuddy(self.max_len_spin)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for w in (self.back_button, self.play_button, self.forward_button, self.slider, self.step_label,
                  self.speed_label, self.speed_combo, self.instant_check, self.max_len_label, self.max_len_spin):
            layout.addWidget(w)
        layout.setStretch(3, 1)
        self.timer = QTimer(self)  # reveals the next kept step; the tab connects it
        self.speed_combo.currentTextChanged.connect(self._on_speed_changed)
        self._on_speed_changed(self.speed_combo.currentText())

    @Slot(str)
    def _on_speed_changed(self, name: str) -> None:
        self.timer.setInterval(SPEEDS.get(name, 350))

    def set_playing(self, playing: bool) -> None:
        (self.timer.start if playing else self.timer.stop)()
        icon = QStyle.StandardPixmap.SP_MediaPause if playing else QStyle.StandardPixmap.SP_MediaPlay
        self.play_button.setIcon(self.style().standardIcon(icon))
        self.play_button.setAccessibleDescription("playing" if playing else "paused")

    def save_settings(self, settings: QSettings) -> None:
        settings.setValue("translate/speed", self.speed_combo.currentText())
        settings.setValue("translate/instant", self.instant_check.isChecked())
        settings.setValue("translate/max_len", self.max_len_spin.value())

    def restore_settings(self, settings: QSettings) -> None:
        speed = settings.value("translate/speed", "Normal")
        if speed in SPEEDS:
            self.speed_combo.setCurrentText(speed)
        self.instant_check.setChecked(settings.value("translate/instant", False, type=bool))
        self.max_len_spin.setValue(settings.value("translate/max_len", DecodeConfig().max_len, type=int))
