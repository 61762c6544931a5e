"""File > LLM prompt: the instruction a decoder-only LLM reads each sentence in, the window's counterpart of the
command line's ``--prompt`` (``{text}`` where the sentence goes, ``{src_lang}`` and ``{tgt_lang}`` the languages'
names), remembered between sessions under ``models/llmPrompt`` and applied to every LLM the app opens. A new
instruction makes a view of the model (``Translator.choosing``) that the window uses from then on; a model that
reads no prompt leaves the entry disabled.
"""

from __future__ import annotations

from typing import Any, Protocol

from PySide6.QtCore import QSettings
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QInputDialog, QMenu, QWidget

from attnviz.engine.errors import InputError

KEY = "models/llmPrompt"


class _Window(Protocol):
    settings: QSettings

    @property
    def translator(self) -> Any: ...  # the model in use, or None

    def show_status(self, text: str) -> None: ...

    def use_view(self, view: Any) -> None: ...  # the model in use with other request settings


def reads_prompt(translator: Any) -> bool:
    return translator is not None and translator.kind.reads_prompt


def add_prompt_action(window: _Window, menu: QMenu) -> QAction:
    """The menu entry, enabled while an LLM is in use (``update_prompt_action``)."""
    action = menu.addAction("LLM pro&mpt...")
    action.setStatusTip("The instruction a decoder-only LLM reads each sentence in: {text} is the sentence, "
                        "{src_lang} and {tgt_lang} the languages")
    action.setEnabled(False)
    action.triggered.connect(lambda checked=False: edit_prompt(window))
    return action


def apply_prompt(window: _Window, translator: Any) -> None:
    """Give a newly opened LLM the remembered instruction (one that no longer reads is forgotten, and said)."""
    stored = window.settings.value(KEY, "")
    if not reads_prompt(translator) or not isinstance(stored, str) or not stored:
        return
    try:
        translator.use_prompt(stored)
    except InputError as exc:
        window.settings.remove(KEY)
        window.show_status(f"The remembered LLM prompt was set aside: {exc}")


def edit_prompt(window: _Window) -> None:
    """Ask for the instruction (the current one filled in); a bad one is refused with its reason, nothing changed."""
    translator = window.translator
    if not reads_prompt(translator):
        return
    parent = window if isinstance(window, QWidget) else None
    text, ok = QInputDialog.getMultiLineText(parent, "LLM prompt", "The instruction each sentence is put into "
                                             "({text}: the sentence; {src_lang}, {tgt_lang}: the languages):",
                                             translator.prompt_template or "")
    if not ok:
        return
    try:
        view = translator.choosing(prompt=text)  # a view: a job running on the old one keeps its prompt
    except InputError as exc:
        window.show_status(str(exc))
        return
    window.use_view(view)
    window.settings.setValue(KEY, text)
    window.show_status("The LLM prompt is set: translate again to read the sentence in it.")
