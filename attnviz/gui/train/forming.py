"""Attention forming: the probe sentence's cross-attention at every evaluation of a training run (a language
model's probe shows its masked self-attention instead: the one kind it has).

A slider (and a replay button) walks through the evaluations; the large heatmap shows the chosen layer and head
(or the mean of the heads) at that point, next to the translation the model produced then. A film strip underneath
shows the same map at every evaluation side by side, with its mean row entropy, so the alignment can be seen
sharpening from a blur into a near-diagonal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QRect, QSize, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPainter, QPalette, QPen
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QSlider, QVBoxLayout, QWidget

from attnviz.engine.events import ATTENTION_KINDS, Translation
from attnviz.gui.attention.colormap import to_image
from attnviz.gui.attention.heatmap import HeatmapData, HeatmapView
from attnviz.gui.attention.panel import set_choices
from attnviz.gui.widgets import add_labelled, guarded_paint, named
from attnviz.session.attention.wording import head_choices
from attnviz.session.train.run_document import EvaluationAdded, RunChange, RunCleared

START_HINT = "Start training: the probe sentence's cross-attention appears at every evaluation"

@dataclass(frozen=True)
class Snapshot:
    """The probe's translation at one evaluation."""

    step: int
    epoch: int
    bleu: float | None  # None for a language model
    probe: Translation


def row_entropy(matrix: np.ndarray) -> float:
    """Mean entropy (nats) of the rows of an attention map: lower means sharper attention."""
    p = np.clip(matrix, 1e-12, 1.0)
    return float(-(p * np.log(p)).sum(axis=-1).mean()) if matrix.size else 0.0


def probe_kind(translation: Translation) -> str | None:
    """The attention the forming view follows: cross-attention, or a language model's decoder self-attention."""
    return next((k for k in ("cross", "decoder") if k in translation.attention), None)


def select_map(translation: Translation, layer: int, head: int | None) -> np.ndarray:
    """The probe's map (``probe_kind``) of ``layer``: one head or (``head`` None) the mean of the heads."""
    maps = translation.attention.get(probe_kind(translation) or "")
    if maps is None or maps.size == 0:
        return np.zeros((0, 0), dtype=np.float32)
    layer = min(layer, maps.shape[0] - 1)
    return maps[layer].mean(axis=0) if head is None else maps[layer, min(head, maps.shape[1] - 1)]


class FilmStrip(QWidget):
    """One thumbnail per evaluation; the current one is outlined, clicking one selects it."""

    clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("formingStrip")
        self.setAccessibleName("Attention at every evaluation")
        self.setMinimumHeight(118)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._images: list[QImage] = []
        self._labels: list[str] = []
        self._current = -1
        self._tiles: list[QRect] = []

    def set_frames(self, maps: list[np.ndarray], labels: list[str], current: int) -> None:
        self._images = [to_image(m, False) for m in maps]
        self._labels, self._current = labels, current
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(600, 118)

    @guarded_paint
    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        self._tiles = []
        if not self._images:
            painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter,
                             "Every evaluation adds a frame here: watch the alignment form")
            return
        label_h, gap = 30, 6
        size = max(12, min(self.height() - label_h - 4, (self.width() - gap) // len(self._images) - gap))
        text = self.palette().color(QPalette.ColorRole.WindowText)
        for i, (image, label) in enumerate(zip(self._images, self._labels)):
            tile = QRect(gap + i * (size + gap), 2, size, size)
            painter.drawImage(tile, image)
            self._tiles.append(tile)
            if i == self._current:
                painter.setPen(QPen(QColor(255, 80, 80), 2))
                painter.drawRect(tile.adjusted(-1, -1, 1, 1))
            painter.setPen(text)
            painter.drawText(QRect(tile.left() - gap // 2, tile.bottom() + 2, size + gap, label_h),
                             Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop, label)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        for i, tile in enumerate(self._tiles):
            if tile.contains(event.position().toPoint()):
                self.clicked.emit(i)
                return


class FormingPanel(QWidget):
    """The probe's attention (cross, or a language model's self-attention) over the course of training."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.snapshots: list[Snapshot] = []
        self._follow_latest = True
        self.layer_combo = named(QComboBox(), "formingLayerCombo", "Layer of the probe's attention")
        self.head_combo = named(QComboBox(), "formingHeadCombo", "Head, or the mean of all heads")
        for combo in (self.layer_combo, self.head_combo):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.slider = named(QSlider(Qt.Orientation.Horizontal), "formingSlider", "Evaluation",
                            "Move through the evaluations so far")
        self.slider.setEnabled(False)
        self.replay_button = named(QPushButton("Re&play"), "formingReplay", "Replay",
                                   "Play the evaluations from the first to the latest")
        self.position_label = QLabel("No evaluation yet")
        self.translation_label = QLabel()
        self.translation_label.setObjectName("formingTranslation")
        self.translation_label.setWordWrap(True)
        self.translation_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.heatmap = HeatmapView()
        self.heatmap.placeholder = START_HINT
        self.strip = FilmStrip()
        self._replay = QTimer(self)
        self._replay.setInterval(600)

        controls = QHBoxLayout()
        add_labelled(controls, (("&Layer", self.layer_combo), ("He&ad", self.head_combo)))
        controls.addWidget(self.slider, 1)
        controls.addWidget(self.replay_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(controls)
        layout.addWidget(self.position_label)
        layout.addWidget(self.translation_label)
        layout.addWidget(self.heatmap, 1)
        layout.addWidget(self.strip)

        self.slider.valueChanged.connect(self._on_slider)
        self.layer_combo.currentIndexChanged.connect(self._redraw)
        self.head_combo.currentIndexChanged.connect(self._redraw)
        self.strip.clicked.connect(self.slider.setValue)
        self.replay_button.clicked.connect(self.replay)
        self._replay.timeout.connect(self._replay_tick)

    # -- data --------------------------------------------------------------------------------------------------------

    def clear(self, running: bool = False) -> None:
        """No evaluation shown; ``running``: a run has started, so the hint to start one goes."""
        self.heatmap.placeholder = "" if running else START_HINT
        self.snapshots = []
        self._follow_latest = True
        self.slider.setRange(0, 0)
        self.slider.setEnabled(False)
        self.position_label.setText("No evaluation yet")
        self.translation_label.clear()
        self.heatmap.set_data(None)
        self.strip.set_frames([], [], -1)

    def on_run_changed(self, change: RunChange) -> None:
        """Follow the Train tab's run: a new run empties the view, an evaluation with a probe adds a frame."""
        match change:
            case RunCleared():
                self.clear(running=True)
            case EvaluationAdded(result=result) if result.probe is not None:
                record = result.record
                self.add(Snapshot(record.step, record.epoch, record.bleu, result.probe))

    def add(self, snapshot: Snapshot) -> None:
        """Append an evaluation; the view follows the newest one unless the user moved the slider back."""
        if probe_kind(snapshot.probe) is None:
            return
        first = not self.snapshots
        self.snapshots.append(snapshot)
        if first:
            self._fill_selectors(snapshot.probe)
        self.slider.blockSignals(True)
        self.slider.setRange(0, len(self.snapshots) - 1)
        if self._follow_latest:
            self.slider.setValue(len(self.snapshots) - 1)
        self.slider.blockSignals(False)
        self.slider.setEnabled(len(self.snapshots) > 1)
        self._redraw()

    def _fill_selectors(self, probe: Translation) -> None:
        kind = probe_kind(probe)
        if kind is None:  # such probes are never added
            return
        layers, heads = probe.attention[kind].shape[:2]
        set_choices(self.layer_combo, [f"Layer {i + 1}" for i in range(layers)], layers - 1, layers > 1)
        set_choices(self.head_combo, *head_choices(heads, 0), heads > 1)

    def current_index(self) -> int:
        return self.slider.value() if self.snapshots else -1

    def _head(self) -> int | None:
        return None if self.head_combo.currentIndex() <= 0 else self.head_combo.currentIndex() - 1

    # -- view --------------------------------------------------------------------------------------------------------

    @Slot(int)
    def _on_slider(self, value: int) -> None:
        self._follow_latest = value == len(self.snapshots) - 1
        self._redraw()

    @Slot()
    def _redraw(self) -> None:
        if not self.snapshots:
            return
        index, layer, head = self.slider.value(), max(self.layer_combo.currentIndex(), 0), self._head()
        snap = self.snapshots[index]
        followed = probe_kind(snap.probe)
        if followed is None:  # such probes are never added
            return
        matrix = select_map(snap.probe, layer, head)
        which = "mean of heads" if head is None else f"head {head + 1}"
        bleu = "" if snap.bleu is None else f", validation BLEU {snap.bleu:.2f}"
        self.position_label.setText(
            f"Evaluation {index + 1} of {len(self.snapshots)}: epoch {snap.epoch}, step {snap.step:,}{bleu}; "
            f"layer {layer + 1} {which}, mean row entropy {row_entropy(matrix):.3f} nats (lower is sharper)")
        generated = snap.probe.src_tokens == ()
        self.translation_label.setText(f"<b>{'Generated' if generated else 'Translation'} then:</b> "
                                       f"{snap.probe.text or '(empty)'}")
        kind = ATTENTION_KINDS[followed]
        rows, cols = snap.probe.axis_labels(kind.key)
        self.heatmap.set_data(HeatmapData(matrix, rows, cols, kind.query_axis.capitalize(),
                                          kind.key_axis.capitalize(), f"{kind.label}, layer {layer + 1}, {which}"))
        maps = [select_map(s.probe, layer, head) for s in self.snapshots]
        labels = [f"ep {s.epoch}\n{row_entropy(m):.2f}" for s, m in zip(self.snapshots, maps)]
        self.strip.set_frames(maps, labels, index)

    @Slot()
    def replay(self) -> None:
        if len(self.snapshots) > 1:
            self.slider.setValue(0)
            self._replay.start()

    @Slot()
    def _replay_tick(self) -> None:
        if self.slider.value() >= len(self.snapshots) - 1:
            self._replay.stop()
        else:
            self.slider.setValue(self.slider.value() + 1)
