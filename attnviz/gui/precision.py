"""The app's one precision setting (File > Precision): the dtype every model the app opens runs at, remembered
between sessions under ``models/dtype``; the window's counterpart of the command line's ``--dtype`` (``attnviz gui
--dtype`` sets it). Choosing another reopens the model in use at the new precision; ``load_job`` is the worker
job that opens every model at it.
"""

from __future__ import annotations

from typing import Any, Protocol

from PySide6.QtCore import QSettings
from PySide6.QtGui import QActionGroup
from PySide6.QtWidgets import QMenu

from attnviz.engine.checkpoints.memory import AUTO, DTYPE_CHOICES

KEY = "models/dtype"
LABELS = {AUTO: "&Automatic (float32 on the CPU; an LLM as stored)", "float32": "float&32",
          "float16": "float1&6 (half the memory)",
          "bfloat16": "&bfloat16 (half the memory)"}


class _Window(Protocol):
    settings: QSettings

    @property
    def translator(self) -> Any: ...  # the model in use, or None

    def load_model(self, path: str) -> None: ...


def precision(settings: QSettings) -> str:
    """The remembered precision (``auto`` when none, or one this attnviz does not know, is stored)."""
    value = settings.value(KEY, AUTO)
    return value if isinstance(value, str) and value in DTYPE_CHOICES else AUTO


def add_precision_menu(window: _Window, menu: QMenu) -> QMenu:
    """File > Precision: one checkable entry per dtype, the remembered one checked."""
    sub = menu.addMenu("Prec&ision")
    sub.setToolTipsVisible(True)
    group = QActionGroup(sub)
    for dtype, label in LABELS.items():
        action = sub.addAction(label)
        action.setCheckable(True)
        action.setChecked(dtype == precision(window.settings))
        action.setToolTip("The precision models run at; float16 and bfloat16 need half the memory")
        group.addAction(action)
        action.triggered.connect(lambda checked=False, d=dtype: choose(window, d))
    return sub


def load_job(path: str, dtype: str):
    """Worker job: load a checkpoint or folder at ``dtype`` and warm its tokenizer (both slow: off the GUI
    thread)."""
    from attnviz.engine.loading import load_translator

    translator = load_translator(path, dtype)
    translator.src_spec.prepare()
    yield translator


def choose(window: _Window, dtype: str) -> None:
    """Remember ``dtype`` and reopen the model in use at it."""
    window.settings.setValue(KEY, dtype)
    path = getattr(window.translator, "metadata", {}).get("path") if window.translator is not None else None
    if path:
        window.load_model(str(path))
