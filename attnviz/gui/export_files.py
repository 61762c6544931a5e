"""What the window's exports propose and draw: a file name that says what is in the file (the attention kind, layer,
head and step of a view, ``cross-L3-H5-step7.png``; the model and sentence of an attention archive), in the folder
the last export went to, remembered in the settings (layers, heads and steps 1-based, as the views show them and as
``--mask-heads`` takes them); and the cells an exported figure hatches, as the app does."""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

import numpy as np
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QFileDialog, QWidget

from attnviz.engine.heads import SHORT_NAMES, HeadRef
from attnviz.gui.attention.heatmap import HeatmapData
from attnviz.gui.widgets import stored

EXPORT_DIR = "export/dir"
_UNSAFE = re.compile(r"[^\w.-]+")


def view_stem(kind: str, layer: int, head: int | None, step: int, merged: bool = False) -> str:
    """``cross-L3-H5-step7`` (0-based ``layer``, ``head`` and ``step`` in; ``head`` None: the mean of the heads;
    ``step`` -1: the encoder pass, before any step); ``-words`` when pieces are merged into words."""
    heads = "mean" if head is None else f"H{head + 1}"
    return f"{SHORT_NAMES.get(kind, kind)}-L{layer + 1}-{heads}-step{step + 1}" + ("-words" if merged else "")


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
