"""The Translate tab's decoding row (greedy; sampled, in Generate mode, with temperature and seed; or beam search
with its width and length penalty), remembering its own settings, and the example sentences the tab offers.

A plain widget that holds its controls; the tab reads them when it starts a decode (the playback bar is
``playback.PlaybackBar``).
"""

from __future__ import annotations

import json

from PySide6.QtCore import QSettings, Qt, Slot
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QWidget,
)

from attnviz.engine.config import DecodeConfig
from attnviz.gui.widgets import named, stored
from attnviz.paths import resources_dir


def load_examples() -> dict[str, list[str]]:
    """The example sentences of each source language (resources/examples.json)."""
    try:
        return json.loads((resources_dir() / "examples.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


MODES = ("greedy", "sampled", "beam")
CONFIGURED = len(MODES)  # the Decoding list's index of a model's own decoding, when it has one


class SamplingRow(QWidget):
    """How the next decode searches: greedy (the most probable token each step), sampled at a temperature from a
    seed (offered for a language model, as before), or beam search (width 1-12, GNMT length penalty alpha)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.sampling_combo = named(QComboBox(), "samplingCombo", "Decoding",
                                    "Greedy: always the most probable token; Sampled: drawn from the softmax (language "
                                    "models); Beam search: the best of several hypotheses, shown as a tree; Model's "
                                    "own (an imported model's): as its authors configured it in generation_config.json")
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
        # an imported model's own decoding (its generation_config.json): a fourth choice of the Decoding list when it
        # has one, reached by the list's Alt+G (every letter is taken on the Translate tab, so no check box of its own)
        self.configured: DecodeConfig | None = None
        self.decoding_label = QLabel("Decodin&g")
        self.decoding_label.setBuddy(self.sampling_combo)
        self.sample_labels = (QLabel("Temperature"), QLabel("Seed"))
        self.beam_labels = (QLabel("Width"), QLabel("Length penalty"))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for w in (self.decoding_label, self.sampling_combo, self.sample_labels[0],
                  self.temperature_spin,
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
        if self.uses_configured():
            return "beam" if self.configured is not None and self.configured.beam > 1 else "greedy"
        return MODES[min(max(self.sampling_combo.currentIndex(), 0), len(MODES) - 1)]

    def uses_configured(self) -> bool:
        return self.configured is not None and self.sampling_combo.currentIndex() == CONFIGURED

    def set_configured(self, decode: DecodeConfig | None, label: str | None) -> None:
        """Offer (and choose) a model's configured decoding as the Decoding list's last choice, ``label`` saying what
        it is ("as configured by the model (beam 4, ...)"); None: attnviz's own settings only."""
        self.configured = decode
        combo = self.sampling_combo
        if combo.count() > CONFIGURED:
            combo.removeItem(CONFIGURED)
        if decode is not None:
            search = f"beam {decode.beam}" if decode.beam > 1 else "greedy"
            combo.addItem(f"Model's own ({search})")
            combo.setItemData(CONFIGURED, f"Decode {label}" if label else None, Qt.ItemDataRole.ToolTipRole)
            combo.setCurrentIndex(CONFIGURED)
        self._on_sampling_changed(combo.currentIndex())

    def set_generating(self, generating: bool) -> None:
        """Sampling is offered for a language model only; a translation model that was sampling turns greedy."""
        self.generating = generating
        options = self.sampling_combo.model()
        sampled = options.item(1) if isinstance(options, QStandardItemModel) else None  # a combo's own model
        if sampled is not None:
            sampled.setEnabled(generating)
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
        """``decode`` greedy, sampled or beam as chosen; a sample takes the seed and advances it for the next one.
        The model's decoding replaces all but the heads switched off."""
        if self.uses_configured() and self.configured is not None:
            return self.configured.replace(heads_off=decode.heads_off, rescale_heads=decode.rescale_heads)
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
        sampled = stored(settings, "generate/sampled", True)
        mode = stored(settings, "decode/mode", "sampled" if sampled else "greedy")
        self.sampling_combo.setCurrentIndex(MODES.index(mode) if mode in MODES else 0)
        if mode == "sampled" and not self.generating:
            self.sampling_combo.setCurrentIndex(0)
        self.beam_spin.setValue(stored(settings, "decode/beam", 5))
        self.penalty_spin.setValue(stored(settings, "decode/length_penalty", DecodeConfig().length_penalty))
        self.temperature_spin.setValue(stored(settings, "generate/temperature", 1.0))
        self.seed_spin.setValue(stored(settings, "generate/seed", 0))
