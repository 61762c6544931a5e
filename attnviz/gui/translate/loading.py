"""The Translate tab while the window loads another model: nothing decodes with the model it replaces. The Translate
button is disabled and says which model is coming; a decode asked meanwhile (Enter, the menu, a heads-off re-decode)
is remembered and run with the new model once it is here; a what-if is refused with a sentence (``waiting``).

``loading_state`` is the plain words of the state; ``LoadingGate`` holds it and puts it on the tab's controls.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit, QPushButton

from attnviz.session.translate.mode import ModeTexts


@dataclass(frozen=True)
class LoadingState:
    """The input's label, the Translate button and what may be used, with a model loading or not."""

    source_label: str  # the language of the model in use; none while another loads
    button: str
    tip: str
    ready: bool  # the button and the examples work: a model is in use and none is loading
    typing: bool  # the input takes text: a model is in use or coming


def loading_state(texts: ModeTexts, loaded: bool, loading: str | None) -> LoadingState:
    """The state with a model in use (``loaded``, its words ``texts``) and ``loading``, the name of the model being
    loaded (None: none)."""
    if loading:  # what is typed now goes to the model coming, whose language is not known yet
        return LoadingState("&Sentence:", f"Loading {loading}\u2026",
                            f"{loading} is loading; press Enter now and it decodes with it once it is here",
                            False, True)
    return LoadingState(texts.source_label, texts.button, texts.button_tip, loaded, loaded)


class LoadingGate:
    """Which model is loading (``name``), whether a decode was asked meanwhile, and the tab's controls as that says."""

    def __init__(self, label: QLabel, button: QPushButton, examples: QComboBox, edit: QLineEdit):
        self._label, self._button, self._examples, self._edit = label, button, examples, edit
        self.name: str | None = None
        self.pending = False

    def show(self, texts: ModeTexts, loaded: bool, name: str | None) -> None:
        """``name`` is loading (None: no more; a decode asked meanwhile is then dropped unless ``take`` took it)."""
        self.name, self.pending = name, self.pending and name is not None
        state = loading_state(texts, loaded, name)
        self._label.setText(state.source_label)
        self._button.setText(state.button)
        self._button.setToolTip(state.tip)
        self._button.setEnabled(state.ready)
        self._examples.setEnabled(state.ready)
        self._edit.setEnabled(state.typing)

    def hold(self) -> str:
        """A decode asked now: "" when nothing loads, else it waits and this says so."""
        if self.name is None:
            return ""
        self.pending = True
        return f"Waiting for {self.name} to load; it decodes then."

    def take(self) -> bool:
        """Whether a decode waits for the model that has just come (and it no longer does)."""
        pending, self.pending = self.pending, False
        return pending

    def waiting(self) -> str:
        """Why nothing may branch now, or ""."""
        return f"Wait until {self.name} has loaded." if self.name else ""
