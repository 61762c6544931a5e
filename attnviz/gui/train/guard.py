"""Guards around training runs: never overwrite a trained model silently, never stop a run by accident.

Start used to write over an existing checkpoint (even the model open in the Translate tab), and Alt+T then Space
stopped a run without a word. ``choose_output`` looks at every file of the run (best, last, state and epoch files)
and either goes ahead, offers a fresh name, or asks before overwriting; the model open for translation is never
overwritten. ``confirm_stop`` asks before stopping a running (not paused) run. The questions go through ``ask`` so
that tests can answer them.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtWidgets import QMessageBox, QPushButton, QWidget

from attnviz.engine.training.runs import RunPaths

OVERWRITE, FRESH, CANCEL = "overwrite", "fresh", "cancel"


def run_files(out: str | os.PathLike) -> list[Path]:
    """The files of the run whose best checkpoint is ``out`` that exist now."""
    paths = RunPaths(Path(out))
    found = [p for p in (paths.best, paths.last, paths.state) if p.exists()]
    stem = paths.stem.name
    if paths.best.parent.is_dir():
        found += sorted(paths.best.parent.glob(f"{stem}.epoch*.safetensors"))
    return found


def fresh_path(out: str | os.PathLike) -> str:
    """``out`` with the first free numeric suffix (run-2.safetensors, run-3...) whose run has no files."""
    path = Path(out)
    stem = path.name.removesuffix(".safetensors")
    n = 2
    while run_files(path.with_name(f"{stem}-{n}.safetensors")):
        n += 1
    return str(path.with_name(f"{stem}-{n}.safetensors"))


def _same(a: str | os.PathLike, b: str | os.PathLike | None) -> bool:
    return b is not None and bool(b) and os.path.abspath(a) == os.path.abspath(b)


def _ask(parent: QWidget, title: str, text: str, choices: list[str]) -> str:
    """A modal question with the given choices (OVERWRITE, FRESH, CANCEL); returns the one picked."""
    box = QMessageBox(QMessageBox.Icon.Warning, title, text, QMessageBox.StandardButton.NoButton, parent)
    labels = {OVERWRITE: ("Overwrite", QMessageBox.ButtonRole.DestructiveRole),
              FRESH: ("Use a new name", QMessageBox.ButtonRole.AcceptRole),
              CANCEL: ("Cancel", QMessageBox.ButtonRole.RejectRole)}
    buttons = {box.addButton(*labels[c]): c for c in choices}
    box.setDefaultButton(next(b for b, c in buttons.items() if c == FRESH))  # the safe choice on Enter
    box.exec()
    clicked = box.clickedButton()
    return buttons.get(clicked, CANCEL) if isinstance(clicked, QPushButton) else CANCEL


def choose_output(parent: QWidget, out: str, protected: str | None, ask=_ask) -> str | None:
    """The checkpoint path to train into, or None to not start. ``protected`` is the model open for translation."""
    existing = run_files(out)
    if not existing:
        return out
    fresh = fresh_path(out)
    names = ", ".join(p.name for p in existing[:4]) + (" ..." if len(existing) > 4 else "")
    if any(_same(p, protected) for p in existing):
        text = (f"{Path(out).name} is the model open in the Translate tab; training would overwrite it.\n\n"
                f"Train into {Path(fresh).name} instead?")
        choice = ask(parent, "The model in use would be overwritten", text, [FRESH, CANCEL])
    else:
        text = (f"A run already exists here: {names}.\nStarting would overwrite it and its trained weights.\n\n"
                f"Overwrite it, or train into {Path(fresh).name}?")
        choice = ask(parent, "A trained model would be overwritten", text, [FRESH, OVERWRITE, CANCEL])
    return {FRESH: fresh, OVERWRITE: out}.get(choice)


def _confirm(parent: QWidget, title: str, text: str) -> bool:
    answer = QMessageBox.question(parent, title, text,
                                  QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                                  QMessageBox.StandardButton.No)
    return answer == QMessageBox.StandardButton.Yes


def confirm_stop(parent: QWidget, paused: bool, confirm=_confirm) -> bool:
    """Whether to stop the run: a paused run stops at once (pausing was the deliberate act); a running one asks,
    with No as the default, so a stray key press cannot end hours of training."""
    if paused:
        return True
    return confirm(parent, "Stop training?", "Stop training now? A checkpoint is saved first, and Resume a run "
                   "continues from it later.")


ask_output, confirm = _ask, _confirm  # what the Train tab calls (tests put their own answers in its place)
