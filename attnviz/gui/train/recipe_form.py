"""RecipeForm: choose a preset or your own data files, edit the hyperparameters, pick the data and output paths.

Every edit is checked as it is typed: first the value's type against the preset's value, then the engine's own
validation (``Recipe.override``), so a bad value is refused with the engine's message before training starts.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings, Qt, Signal, Slot
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from attnviz.engine.config import WARMUP_SCHEDULES, ModelConfig
from attnviz.engine.corpus.reader import CorpusSpec, resolve_data_dir
from attnviz.engine.errors import ConfigError
from attnviz.engine.kinds import get_kind
from attnviz.engine.text.tokenize import TokenizerSpec
from attnviz.engine.training.presets import PRESETS, Recipe
from attnviz.gui.widgets import copyable, named
from attnviz.session.train.setting_help import setting_help

CUSTOM = "__custom__"
EDITABLE = (
    "train.epochs", "train.batch_size", "train.max_tokens", "train.lr", "train.schedule", "train.warmup",
    "train.label_smoothing", "train.clip_norm", "train.weight_decay", "train.eval_every", "train.bleu_sentences",
    "train.keep_metric", "train.average_last", "train.save_epochs", "train.seed", "train.device", "train.threads",
    "train.precision",
    "model.d_model", "model.enc_layers", "model.dec_layers", "model.heads", "model.ff_dim", "model.dropout",
    "model.positions", "model.norm", "model.tie_output", "model.max_positions", "model.hidden", "model.score",
    "train.teacher_forcing", "corpus.limit", "min_freq", "probe",
)
def editable_keys(recipe: Recipe) -> list[str]:
    """The settings the form offers for ``recipe``'s model kind (its registry entry says which it ignores)."""
    skip = get_kind(recipe.model.get("kind", _MODEL_DEFAULTS["kind"])).unused_settings
    return [key for key in EDITABLE if key not in skip]
_MODEL_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ModelConfig) if f.default is not dataclasses.MISSING}


def current_value(recipe: Recipe, key: str) -> Any:
    section, _, name = key.rpartition(".")
    if section == "model":
        return recipe.model.get(name, _MODEL_DEFAULTS.get(name))
    if section == "train":
        return getattr(recipe.train, name)
    if section == "corpus":
        return getattr(recipe.corpus, name)
    return getattr(recipe, name)


def show_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(list(value) if isinstance(value, tuple) else value)


def parse_value(key: str, text: str, like: Any) -> Any:
    """``text`` as the type of ``like`` (the preset's value), or ConfigError naming the setting."""
    text = text.strip()
    try:
        if isinstance(like, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if isinstance(like, int):
            return int(text)
        if isinstance(like, float):
            return float(text)
        if isinstance(like, (tuple, list)):
            value = json.loads(text)
            if not isinstance(value, list):
                raise ValueError
            return value
    except ValueError:
        kind = {bool: "true or false", int: "a whole number", float: "a number"}.get(type(like), "a JSON list")
        raise ConfigError(f"{key} must be {kind}, not {text!r}") from None
    return text


def custom_recipe(src_lang: str, tgt_lang: str, paths: dict[str, list[str]]) -> Recipe:
    """Reference A's model and training on the user's own parallel files."""
    base = PRESETS["multi30k-de-en"]
    try:
        return dataclasses.replace(
            base, name=f"custom-{src_lang}-{tgt_lang}", description="Your own parallel text files.",
            corpus=CorpusSpec("files", src_lang, tgt_lang, paths=paths), src_tokenizer=TokenizerSpec(src_lang),
            tgt_tokenizer=TokenizerSpec(tgt_lang), probe="")
    except ConfigError as exc:
        raise ConfigError(f"custom data: {exc}") from None


def _path_row(edit: QLineEdit, browse, tip: str) -> QHBoxLayout:
    edit.setToolTip(tip)
    edit.setAccessibleName(tip)
    button = QPushButton("Browse...")
    button.setAccessibleName(f"Browse: {tip}")
    button.clicked.connect(browse)
    row = QHBoxLayout()
    row.addWidget(edit, 1)
    row.addWidget(button)
    return row


def _buddy(text: str, widget: QWidget) -> QLabel:
    label = QLabel(text)
    label.setBuddy(widget)
    return label


class RecipeForm(QWidget):
    changed = Signal()  # the recipe or its validity changed

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.preset_combo = named(QComboBox(), "presetCombo", "Recipe")
        for name, recipe in PRESETS.items():
            self.preset_combo.addItem(name, name)
            self.preset_combo.setItemData(self.preset_combo.count() - 1, recipe.description,
                                          Qt.ItemDataRole.ToolTipRole)
        self.preset_combo.addItem("Custom data files", CUSTOM)
        self.description = QLabel()
        self.description.setWordWrap(True)
        self.description.setObjectName("presetDescription")
        self.custom = self._build_custom()
        self.table = copyable(named(QTableWidget(0, 2), "settingsTable", "Hyperparameters"))
        self.table.setHorizontalHeaderLabels(["Setting", "Value"])
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.AllEditTriggers)
        self.data_edit = QLineEdit(str(resolve_data_dir()))
        self.data_edit.setObjectName("dataDirEdit")
        self.out_edit = QLineEdit()
        self.out_edit.setObjectName("outputEdit")
        self.error_label = QLabel()
        self.error_label.setObjectName("recipeError")
        self.error_label.setWordWrap(True)
        self.error_label.hide()

        form = QFormLayout()
        form.addRow("Re&cipe", self.preset_combo)
        form.addRow("", self.description)
        form.addRow(_buddy("&Data folder", self.data_edit),
                    _path_row(self.data_edit, self._browse_data, "Folder with the corpora"))
        form.addRow(_buddy("Chec&kpoint", self.out_edit),
                    _path_row(self.out_edit, self._browse_out, "Where the checkpoint is written"))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(form)
        layout.addWidget(self.custom)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.error_label)

        self._loading = False
        self.preset_combo.currentIndexChanged.connect(self._on_preset)
        self.table.itemChanged.connect(self._on_item_changed)
        self.out_edit.textChanged.connect(self.changed)
        self._on_preset()

    def _build_custom(self) -> QWidget:
        box = QWidget()
        self.src_lang_edit, self.tgt_lang_edit = QLineEdit("de"), QLineEdit("en")
        self.file_edits = {key: QLineEdit() for key in ("train.src", "train.tgt", "val.src", "val.tgt")}
        form = QFormLayout(box)
        form.setContentsMargins(0, 0, 0, 0)
        langs = QHBoxLayout()
        for text, edit in (("Source language", self.src_lang_edit), ("Target language", self.tgt_lang_edit)):
            edit.setMaximumWidth(60)
            edit.setAccessibleName(text)
            edit.textChanged.connect(self._validate)
            langs.addWidget(QLabel(text))
            langs.addWidget(edit)
        langs.addStretch(1)
        form.addRow(langs)
        for key, edit in self.file_edits.items():
            split, side = key.split(".")
            label = f"{split.capitalize()} {'source' if side == 'src' else 'target'} file"
            edit.textChanged.connect(self._validate)
            form.addRow(label, _path_row(edit, lambda checked=False, e=edit: self._browse_file(e), label))
        return box

    # -- state -------------------------------------------------------------------------------------------------------

    def base_recipe(self) -> Recipe:
        if self.preset_combo.currentData() == CUSTOM:
            paths = {split: [self.file_edits[f"{split}.src"].text().strip(),
                             self.file_edits[f"{split}.tgt"].text().strip()]
                     for split in ("train", "val")}
            return custom_recipe(self.src_lang_edit.text().strip(), self.tgt_lang_edit.text().strip(), paths)
        return PRESETS[self.preset_combo.currentData()]

    def overrides(self, base: Recipe) -> dict[str, Any]:
        """The settings the user changed, parsed; ConfigError names the first bad one."""
        result = {}
        for row in range(self.table.rowCount()):
            key, text = self._cell(row, 0).text(), self._cell(row, 1).text()
            like = current_value(base, key)
            if text.strip() != show_value(like):
                result[key] = parse_value(key, text, like)
        return result

    def recipe(self) -> Recipe:
        """The recipe to train, or ConfigError with the reason."""
        base = self.base_recipe()
        if base.corpus.kind == "files":
            empty = [k for k, e in self.file_edits.items() if not e.text().strip()]
            if empty:
                raise ConfigError("custom data needs four files: train and val, source and target (one sentence "
                                  "per line, aligned by line)")
        return base.override(self.overrides(base))

    def data_dir(self) -> str:
        return self.data_edit.text().strip()

    def output_path(self) -> str:
        return self.out_edit.text().strip()

    def is_valid(self) -> bool:
        return self.error_label.isHidden()

    def set_enabled_for_run(self, running: bool) -> None:
        for widget in (self.preset_combo, self.table, self.custom, self.data_edit, self.out_edit):
            widget.setEnabled(not running)

    # -- slots -------------------------------------------------------------------------------------------------------

    @Slot()
    def _on_preset(self) -> None:
        custom = self.preset_combo.currentData() == CUSTOM
        self.custom.setVisible(custom)
        base = self.base_recipe() if not custom else PRESETS["multi30k-de-en"]
        self.description.setText(base.description if not custom else
                                 "Your own aligned files (one sentence per line) "
                                 "with reference A's model and training.")
        self._loading = True
        keys = editable_keys(base)
        self.table.setRowCount(len(keys))
        for row, key in enumerate(keys):
            name = QTableWidgetItem(key)
            name.setFlags(Qt.ItemFlag.ItemIsEnabled)
            name.setToolTip(setting_help(key))
            self.table.setItem(row, 0, name)
            self.table.setItem(row, 1, QTableWidgetItem(show_value(current_value(base, key))))
        self._loading = False
        if not self.out_edit.text() or Path(self.out_edit.text()).stem in {*PRESETS, "custom"}:
            self.out_edit.setText(str(default_runs_dir()
                                      / f"{self.preset_combo.currentText() if not custom else 'custom'}.safetensors"))
        self._validate()

    @Slot(QTableWidgetItem)
    def _on_item_changed(self, item: QTableWidgetItem) -> None:
        if not self._loading:
            self._validate()

    @Slot()
    def _validate(self) -> None:
        message, bad_rows = "", set()
        try:
            base = self.base_recipe()
            for row in range(self.table.rowCount()):  # find the rows at fault, for highlighting
                key, text = self._cell(row, 0).text(), self._cell(row, 1).text()
                like = current_value(base, key)
                try:
                    if text.strip() != show_value(like):
                        base.override({key: parse_value(key, text, like)})
                except ConfigError:
                    bad_rows.add(row)
            self.recipe()
        except ConfigError as exc:
            message = str(exc)
        unused = self._unused_rows()
        self._loading = True
        for row in range(self.table.rowCount()):
            item = self._cell(row, 1)
            item.setBackground(QBrush(QColor(217, 83, 79, 90)) if row in bad_rows else QBrush())
            item.setForeground(QBrush(QColor(128, 128, 128)) if row in unused else QBrush())
            item.setToolTip(unused.get(row, ""))
        self._loading = False
        self.error_label.setText(message)
        self.error_label.setVisible(bool(message))
        self.changed.emit()

    def _cell(self, row: int, column: int) -> QTableWidgetItem:
        """The item at (``row``, ``column``) of the settings table, which ``_on_preset`` fills entirely."""
        item = self.table.item(row, column)
        if item is None:
            raise LookupError(f"the settings table has no item at row {row}, column {column}")
        return item

    def _unused_rows(self) -> dict[int, str]:
        """Rows whose setting the other values make irrelevant (shown grey), with the reason as a tooltip."""
        rows = {self._cell(row, 0).text(): row for row in range(self.table.rowCount())}
        if "train.schedule" not in rows or "train.warmup" not in rows:
            return {}
        schedule = self._cell(rows["train.schedule"], 1).text().strip()
        if schedule in WARMUP_SCHEDULES:
            return {}
        return {rows["train.warmup"]: f"not used: the {schedule!r} schedule has no warm-up steps"}

    def _browse_data(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Data folder", self.data_dir())
        if path:
            self.data_edit.setText(path)

    def _browse_out(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Checkpoint", self.output_path(),
                                              "attnviz checkpoints (*.safetensors)")
        if path:
            self.out_edit.setText(path if path.endswith(".safetensors") else path + ".safetensors")

    def _browse_file(self, edit: QLineEdit) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Text file", edit.text(), "Text (*.txt *.gz *.tsv);;All files (*)")
        if path:
            edit.setText(path)

    # -- settings ----------------------------------------------------------------------------------------------------

    def save_settings(self, settings: QSettings) -> None:
        settings.setValue("train/preset", self.preset_combo.currentData())
        settings.setValue("train/output", self.output_path())

    def restore_settings(self, settings: QSettings) -> None:
        index = self.preset_combo.findData(settings.value("train/preset", ""))
        if index >= 0:
            self.preset_combo.setCurrentIndex(index)
        value = settings.value("train/output", "")  # the data folder is the app's (gui.data_folder)
        if value:
            self.out_edit.setText(str(value))


def default_runs_dir() -> Path:
    """Where new training runs go unless the user picks another place."""
    return Path.home() / "attnviz-runs"
