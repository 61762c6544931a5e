"""What the window's exports propose and draw: a file name that says what is in the file (the attention kind, layer,
head and step of a view, ``cross-L3-H5-step7.png``; the model and sentence of an attention archive), in the folder
the last export went to, remembered in the settings (layers, heads and steps 1-based, as the views show them and as
``--mask-heads`` takes them; a quantity other than attention by its method, ``alti-plus-L6-step7``, with a JSON
sidecar of its method and settings); and the cells an exported figure hatches, as the app does."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from attnviz.engine.heads import SHORT_NAMES, HeadRef
from attnviz.gui.attention.heatmap import HeatmapData
from attnviz.gui.widgets import stored

if TYPE_CHECKING:  # the mixin's host, for the type checker only
    from PySide6.QtWidgets import QMainWindow as _Window

    from attnviz.engine.translator import Translator
    from attnviz.gui.translate.tab import TranslateTab
else:
    _Window = object

EXPORT_DIR = "export/dir"
_UNSAFE = re.compile(r"[^\w.-]+")


def view_stem(kind: str, layer: int, head: int | None, step: int, merged: bool = False) -> str:
    """``cross-L3-H5-step7`` (0-based ``layer``, ``head`` and ``step`` in; ``head`` None: the mean of the heads;
    ``step`` -1: the encoder pass, before any step); ``-words`` when pieces are merged into words."""
    heads = "mean" if head is None else f"H{head + 1}"
    return f"{SHORT_NAMES.get(kind, kind)}-L{layer + 1}-{heads}-step{step + 1}" + ("-words" if merged else "")


def quantity_view_stem(method: str, layer: int, step: int, layers: int) -> str:
    """``alti-plus-L6-step7`` for a quantity other than attention with one map per layer (``gradient-x-input-step7``
    when it has no layers)."""
    return f"{_UNSAFE.sub('-', method)}" + (f"-L{layer + 1}" if layers > 1 else "") + f"-step{step + 1}"


def write_sidecar(figure: str | Path, meta: dict[str, Any]) -> Path:
    """``figure``'s name + .json (``x.png.json``): what an exported picture of a quantity shows (its method and
    settings). Not ``x.json``: that is the sidecar of an attention archive ``x.npz``, which it would overwrite."""
    from attnviz.engine.checkpoints.store import atomic_write  # imports torch: the window opens without it

    path = Path(figure).with_name(Path(figure).name + ".json")
    atomic_write(path, json.dumps(meta, indent=2, ensure_ascii=False).encode("utf-8"))
    return path


def picture_stem(kind: str, step: int, what: str) -> str:
    """``cross-heads-step7`` for the head grid, ``cross-panel-step7`` for the whole attention panel."""
    return f"{SHORT_NAMES.get(kind, kind)}-{what}-step{step + 1}"


def archive_stem(model: str, sentence: str, words: int = 4) -> str:
    """``attention-de-en-multi30k-zwei-hunde-spielen-im``: the model and the first ``words`` words of the sentence,
    in characters any file system takes."""
    parts = [_UNSAFE.sub("", w) for w in sentence.lower().split()[:words]]
    stem = "-".join(p for p in ["attention", _UNSAFE.sub("-", model).strip("-"), *parts] if p)
    return stem[:120]


def hatched(data: HeatmapData, heads_off: Collection[HeadRef], kind: str, layer: int,
            head: int | None) -> np.ndarray | None:
    """The cells an exported view hatches: those the app hatches (future positions a causal query may not see), or
    every cell of a head switched off (the grid hatches its tile: its zeros are a choice, not attention)."""
    if head is not None and HeadRef(kind, layer, head) in heads_off:
        return np.ones(data.matrix.shape, dtype=bool)
    return data.masked


def ask_save_path(parent: QWidget, settings: QSettings, caption: str, name: str, filters: str) -> str:
    """The save dialog, opened on ``name`` in the folder of the last export (remembered when one is chosen);
    "" when cancelled."""
    folder = stored(settings, EXPORT_DIR, "")
    start = str(Path(folder) / name) if folder and Path(folder).is_dir() else name
    path, _ = QFileDialog.getSaveFileName(parent, caption, start, filters)
    if path:
        settings.setValue(EXPORT_DIR, str(Path(path).parent))
    return path


class ViewExports(_Window):
    """The main window's exports (a mixin of ``MainWindow``): the view as PNG or SVG (with a sidecar naming the
    quantity's method and settings when it is not attention), the head grid or the panel as pictures, and the
    attention archive (NPZ + JSON, with the quantity shown)."""

    translate_tab: TranslateTab
    settings: QSettings
    translator: Translator | None

    def export_view(self, fmt: str) -> None:
        data = self.translate_tab.attention.heatmap.data()
        if data is None:
            self.statusBar().showMessage("Nothing to export yet: translate a sentence first.", 5000)
            return
        tab = self.translate_tab
        panel, quantity, step = tab.attention, tab.quantity, tab.document.current
        name = view_stem(panel.kind or "", panel.layer, panel.head, step, panel.merged) if quantity.result is None \
            else quantity_view_stem(quantity.result.quantity.key, panel.layer, step, panel.layer_combo.count())
        path = ask_save_path(self, self.settings, f"Export view as {fmt.upper()}", f"{name}.{fmt}",
                             f"{fmt.upper()} (*.{fmt})")
        if path:
            from attnviz.plots.heatmap import save_heatmap

            masked = hatched(data, panel.heads_off, panel.kind or "", panel.layer, panel.head)
            off = masked is not None and bool(masked.all())
            value = "attention weight" if quantity.result is None else quantity.result.quantity.label
            save_heatmap(path, data.matrix, data.rows, data.cols, data.row_axis, data.col_axis,
                         self.figure_title(data, off), data.highlight_row, data.per_map, masked, data.signed, value)
            extra = quantity.export_extra()  # a quantity's method and settings, beside the figure
            sidecar = f" and {write_sidecar(path, {'title': self.figure_title(data), **extra[1]}).name}" \
                if extra else ""
            self.statusBar().showMessage(f"Saved {path}{sidecar}", 5000)

    def figure_title(self, data, off: bool = False) -> str:
        """The view's title with its context (model, sentence, step, scale; whether the head is switched off), so an
        exported figure explains itself."""
        from attnviz.engine.export import model_name

        tab = self.translate_tab
        model = model_name(self.translator.info) if self.translator else "no model"
        steps = len(tab.document.steps)
        request = tab.document.request  # the sentence translated, not what the box holds now
        sentence = (request.text if request is not None else tab.source_edit.text()).strip()
        sentence = sentence if len(sentence) <= 60 else sentence[:57] + "..."
        scale = "signed colour scale centred on 0" if data.signed else \
            "per-map colour scale" if data.per_map else "colour scale 0..1"
        title = data.title + (" (switched off)" if off else "")
        return f"{title} · step {tab.document.current + 1}/{steps}\n{model}: \"{sentence}\" · {scale}"

    def export_picture(self, widget, what: str) -> None:
        """A PNG of ``widget`` as shown: the head grid (``what`` "heads") or the whole attention panel ("panel")."""
        if self.translate_tab.current_translation() is None:
            self.statusBar().showMessage("Nothing to export yet: translate a sentence first.", 5000)
            return
        name = picture_stem(self.translate_tab.attention.kind or "", self.translate_tab.document.current, what)
        path = ask_save_path(self, self.settings, "Export as PNG", f"{name}.png", "PNG (*.png)")
        if path and not widget.grab().save(path if path.lower().endswith(".png") else path + ".png"):
            QMessageBox.warning(self, "Export failed", f"Could not save {path}")
        elif path:
            self.statusBar().showMessage(f"Saved {path}", 5000)

    def export_attention(self) -> None:
        translation = self.translate_tab.current_translation()
        if translation is None or self.translator is None:
            self.statusBar().showMessage("Nothing to export yet: translate a sentence first.", 5000)
            return
        from attnviz.engine.export import model_name, save_attention

        request = self.translate_tab.document.request  # the sentence translated, not what the box holds now
        source = request.text if request is not None else self.translate_tab.source_edit.text()
        name = archive_stem(model_name(self.translator.info), source)
        path = ask_save_path(self, self.settings, "Export attention", f"{name}.npz", "NumPy archive (*.npz)")
        if path:
            sidecar = save_attention(path, [translation], self.translator.info, [source],
                                     self.translate_tab.quantity.export_extra())
            self.statusBar().showMessage(f"Saved {path} and {sidecar.name}", 5000)

