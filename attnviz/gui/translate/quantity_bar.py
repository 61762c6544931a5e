"""The attention panel's choice of what its map shows: the Quantity selector (attention, contribution views and
every attribution method the engine registers, each with its description as tooltip and greyed with the reason
when the model cannot give it), the sinks toggle, the side-by-side toggle, and the progress of a slow computation
with its Cancel (Ctrl+Shift+K) over the head grid, and the corrupted source of activation patching (a line edit
beside the selector, shown while a method that reads it is chosen). Views only: the Translate tab fills the choices
and starts the jobs.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QAction, QActionGroup, QKeySequence, QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QProgressBar,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from attnviz.engine.analysis.sinks import WHY
from attnviz.engine.attribution.corruption import DEFAULT
from attnviz.session.translate.quantities import ATTENTION, Quantity, value_text

CANCEL_KEYS = "Ctrl+Shift+K"


class QuantityBar(QWidget):
    """``combo`` (with its label) goes first among the panel's selectors; ``options`` (sinks, side by side) beside
    the scale choice; ``busy`` (progress and Cancel, shown while a quantity is computed) over the head grid."""

    chosen = Signal(str)  # the key of the quantity picked
    setting_changed = Signal(str, object)  # a method's setting (``AttributionSettings`` field) and its new value
    cancelled = Signal()
    options_changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.label = QLabel("&Quantity")
        self.combo = QComboBox()
        self.combo.setObjectName("quantityCombo")
        self.combo.setAccessibleName("Quantity shown in the map")
        self.combo.setToolTip("What the map shows for the step: attention, a contribution view, or an attribution "
                              "(what the output token depended on)")
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.combo.setMinimumWidth(80)
        self.label.setBuddy(self.combo)
        self.settings_menu = QMenu(self)
        self.settings_button = QToolButton()
        self.settings_button.setObjectName("quantitySettingsButton")
        self.settings_button.setText("Settings\u2026")
        self.settings_button.setAccessibleName("Settings of the attribution method")
        self.settings_button.setToolTip("The method's settings: aggregation over the embedding, the attributed "
                                        "quantity, integrated gradients' steps and baseline")
        self.settings_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.settings_button.setMenu(self.settings_menu)
        self.settings_button.setEnabled(False)
        self.sinks_check = QCheckBox("Hide sinks (&z)")  # every letter of the words has an owner
        self.sinks_check.setObjectName("sinksCheck")
        self.sinks_check.setAccessibleName("Hide sink tokens and renormalise")
        self.sinks_check.setToolTip("Hide <sos>, <eos>, punctuation and language tags, and renormalise each row to "
                                    "sum to 1. " + WHY)
        self.span_check = QCheckBox("Prompt: sentence only (&1)")  # every letter has an owner in some state
        self.span_check.setObjectName("spanCheck")
        self.span_check.setAccessibleName("Show only the sentence's tokens of the prompt")
        self.span_check.setToolTip("An LLM reads a prompt: the chat template's tokens, the instruction and the "
                                   "sentence. Checked, the maps' prompt axis and the Source strip show the "
                                   "sentence's own tokens, each attention row renormalised over them (the template "
                                   "and the instruction fold into one chip each); unchecked, the whole prompt with "
                                   "the weights as the model gave them.")
        self.span_check.setChecked(True)
        self.span_check.hide()  # shown for a model that reads a prompt
        self.beside_check = QCheckBox("&Juxtapose")
        self.beside_check.setObjectName("besideCheck")
        self.beside_check.setToolTip("Side by side: the attention map of the step beside the quantity chosen")
        self.options = QWidget()
        row = QHBoxLayout(self.options)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.sinks_check)
        row.addWidget(self.span_check)
        row.addWidget(self.beside_check)
        self.busy = self._busy_box()
        self.corrupt_box = self._corrupt_box()
        self.combo.activated.connect(self._on_combo_activated)
        self.sinks_check.toggled.connect(self.options_changed)
        self.span_check.toggled.connect(self.options_changed)
        self.beside_check.toggled.connect(self.options_changed)

    def _busy_box(self) -> QWidget:
        """What shows while a quantity is computed: what, over a progress bar and Cancel (the grid's column is
        narrow)."""
        self.progress_label = QLabel()
        self.progress = QProgressBar()
        self.progress.setObjectName("quantityProgress")
        self.progress.setAccessibleName("Progress of the computation")
        self.cancel_action = QAction("Cancel the computation", self)
        self.cancel_action.setShortcut(QKeySequence(CANCEL_KEYS))
        self.cancel_action.setToolTip(f"Stop computing; the map stays on attention ({CANCEL_KEYS})")
        self.cancel_action.triggered.connect(self._on_cancel)
        self.cancel_button = QToolButton()  # a short word on the button, the action's words in menus and Help
        self.cancel_button.setObjectName("quantityCancelButton")
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolTip(self.cancel_action.toolTip())
        self.cancel_button.setAccessibleName("Cancel the computation")
        self.cancel_button.clicked.connect(self.cancel_action.trigger)
        self.addAction(self.cancel_action)
        self.progress_label.setWordWrap(True)
        busy = QWidget()
        busy_column = QVBoxLayout(busy)
        busy_column.setContentsMargins(0, 0, 0, 4)
        busy_column.addWidget(self.progress_label)
        busy_row = QHBoxLayout()
        busy_column.addLayout(busy_row)
        busy_row.addWidget(self.progress, 1)
        busy_row.addWidget(self.cancel_button)
        busy.hide()
        self.cancel_action.setEnabled(False)
        return busy

    def _corrupt_box(self) -> QWidget:
        """The corrupted source of activation patching: a label and a line edit, hidden until a method reads it. No
        Alt+letter: every letter has an owner where the Translate tab shows; Tab from the selector (Alt+Q) reaches
        it."""
        self.corrupt_label = QLabel("Corrupt")
        self.corrupt_edit = QLineEdit()
        self.corrupt_edit.setObjectName("corruptEdit")
        self.corrupt_edit.setAccessibleName("Corrupted source of activation patching")
        self.corrupt_edit.setPlaceholderText("<unk> everywhere")
        self.corrupt_edit.setToolTip("The corrupted run's source (Enter to compute): a sentence of as many tokens, or "
                                     "WHICH=WORD, a source token's position (1 = the first column) or the token "
                                     f"itself, replaced by WORD (3=Katze). Empty: {DEFAULT}.")
        self.corrupt_edit.setClearButtonEnabled(True)
        # where the row is short (1024 px) the text gives way first, so that the Quantity choice stays readable
        self.corrupt_edit.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.corrupt_edit.setMinimumWidth(90)
        self.corrupt_edit.editingFinished.connect(self._on_corrupt_edit_finished)
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.corrupt_label)
        row.addWidget(self.corrupt_edit, 1)
        box.hide()
        return box

    # -- state -------------------------------------------------------------------------------------------------------

    @property
    def key(self) -> str:
        return self.combo.currentData() or ATTENTION

    @property
    def sinks_hidden(self) -> bool:
        return self.sinks_check.isChecked()

    @property
    def span_only(self) -> bool:
        """Whether an LLM prompt's axis is cut to the sentence (the box shows only for such a model)."""
        return self.span_check.isChecked()

    @property
    def beside(self) -> bool:
        return self.beside_check.isChecked() and self.key != ATTENTION

    def set_quantities(self, quantities: Sequence[Quantity]) -> None:
        """Offer ``quantities``: each with its description as tooltip, greyed with the reason when not defined."""
        key = self.key
        self.combo.blockSignals(True)
        self.combo.clear()
        model = self.combo.model()
        for i, q in enumerate(quantities):
            self.combo.addItem(q.label, q.key)
            tip = q.description + (f"\nNot available for this model: {q.why_not}." if q.why_not else "")
            self.combo.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)
            if q.why_not and isinstance(model, QStandardItemModel):
                item = model.item(i)
                if item is not None:
                    item.setEnabled(False)
        self.combo.blockSignals(False)
        self.show_key(key)

    def show_settings(self, choices: Sequence[tuple[str, str, Sequence[object], object]]) -> None:
        """The settings menu: one submenu per (name, title, values, current value); disabled when empty."""
        self.settings_menu.clear()
        for name, title, values, current in choices:
            sub = self.settings_menu.addMenu(title)
            group = QActionGroup(sub)
            for value in values:
                action = sub.addAction(value_text(name, value))
                action.setCheckable(True)
                action.setChecked(value == current)
                action.setData((name, value))
                group.addAction(action)
            group.triggered.connect(self._on_setting_triggered)
        self.settings_button.setEnabled(bool(choices))

    def show_corrupt(self, shown: bool, text: str | None) -> None:
        """The corruption's line edit: shown (with ``text``, None for the default) or hidden."""
        if self.corrupt_edit.text() != (text or ""):
            self.corrupt_edit.setText(text or "")
        self.corrupt_box.setVisible(shown)

    @Slot()
    def _on_corrupt_edit_finished(self) -> None:
        self.setting_changed.emit("corrupt", self.corrupt_edit.text().strip() or None)

    @Slot(QAction)
    def _on_setting_triggered(self, action: QAction) -> None:
        name, value = action.data()
        self.setting_changed.emit(name, value)

    def show_key(self, key: str) -> None:
        """Select ``key`` (attention when it is not offered), emitting nothing."""
        index = self.combo.findData(key)
        self.combo.blockSignals(True)
        self.combo.setCurrentIndex(index if index >= 0 else max(self.combo.findData(ATTENTION), 0))
        self.combo.blockSignals(False)

    def show_progress(self, done: int, total: int, text: str) -> None:
        """A computation runs: ``done`` of ``total`` (total 0: a busy bar)."""
        self.progress.setRange(0, max(total, 0))
        self.progress.setValue(min(done, total))
        self.progress_label.setText(text)
        self.progress.setToolTip(text)
        self.busy.show()
        self.cancel_action.setEnabled(True)

    def idle(self) -> None:
        self.busy.hide()
        self.cancel_action.setEnabled(False)

    @Slot(int)
    def _on_combo_activated(self, index: int) -> None:
        self.chosen.emit(self.key)

    @Slot()
    def _on_cancel(self) -> None:
        self.cancelled.emit()
