"""The Train tab's one training run, Qt-free: fed the engine's ``TrainEvent``s, it keeps what the views show (the
checkpoints written, the steps so far, the evaluations, the progress line and any message) and tells its listeners
what changed, so that the tab never relays from one view to another.

Steps arrive faster than anyone can read: ``feed`` buffers them and ``flush`` (the tab's redraw timer, or the next
event that is not a step) hands them to the listeners at once. Listeners are plain callables that ``match`` on
``RunChange``; each record names what changed and the listener reads the rest from the document.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias, assert_never

from attnviz.engine.events import (
    CheckpointSaved,
    EvalResult,
    EvalStarted,
    TrainEvent,
    TrainFailed,
    TrainFinished,
    TrainHistory,
    TrainNote,
    TrainStarted,
    TrainStep,
    TrainStopped,
)
from attnviz.session.listeners import Listeners
from attnviz.session.train import jobs as wording


@dataclass(frozen=True)
class RunCleared:
    """A new run begins: every view empties (``translation``: the recipe translates, so BLEU is plotted)."""

    translation: bool


@dataclass(frozen=True)
class StepsAdded:
    """Training steps since the last flush, in order."""

    steps: tuple[TrainStep, ...]


@dataclass(frozen=True)
class EvaluationAdded:
    """An evaluation's record, samples and (with a probe sentence) the attention it formed."""

    result: EvalResult


@dataclass(frozen=True)
class ProgressChanged:
    """The progress line, the fraction done (0..1, or None when unchanged) or the device line changed."""

    fraction: float | None = None


@dataclass(frozen=True)
class CheckpointsChanged:
    """A best or last checkpoint was written (``paths``)."""


@dataclass(frozen=True)
class MessageChanged:
    """The message under the controls changed (a warning, a failure; empty: none)."""


@dataclass(frozen=True)
class Announced:
    """One line for the window's status bar."""

    text: str


RunChange: TypeAlias = (RunCleared | StepsAdded | EvaluationAdded | ProgressChanged | CheckpointsChanged
                        | MessageChanged | Announced)
Listener: TypeAlias = Callable[[RunChange], None]


class TrainRunDocument:
    """What one training run has shown so far; ``paused`` and ``stopping`` are the tab's, which the progress line
    respects (a step does not overwrite "Paused" or "Stopping")."""

    def __init__(self) -> None:
        self._listeners: Listeners[RunChange] = Listeners()
        self.paths: dict[str, str] = {}  # "best", "last" -> checkpoint path
        self.total_steps = 0
        self.last_step: TrainStep | None = None
        self.pending: list[TrainStep] = []
        self.flushes = 0  # times steps were handed to the views (the curves' redraws)
        self.status_line = "Choose a recipe and press Start."
        self.device_line = wording.run_where("auto (a CUDA GPU when there is one)")
        self.message = ""
        self.paused = self.stopping = False

    def subscribe(self, listener: Listener) -> None:
        self._listeners.subscribe(listener)

    def begin(self, name: str, translation: bool) -> None:
        """A new run of recipe ``name``: empty views, nothing written yet."""
        self.paths, self.pending, self.last_step = {}, [], None
        self.paused = self.stopping = False
        self._listeners.tell(RunCleared(translation))
        self.set_message("")
        self.set_status(f"Preparing {name}: reading and tokenizing the data...", fraction=0.0)

    def set_status(self, text: str, fraction: float | None = None) -> None:
        self.status_line = text
        self._listeners.tell(ProgressChanged(fraction))

    def set_message(self, text: str) -> None:
        self.message = text
        self._listeners.tell(MessageChanged())

    def flush(self) -> None:
        """Hand the buffered steps to the views and move the progress line to the last one."""
        if not self.pending:
            return
        steps, self.pending = tuple(self.pending), []
        self.last_step = steps[-1]
        self.flushes += 1
        self._listeners.tell(StepsAdded(steps))
        if not self.paused and not self.stopping:
            self.status_line = wording.step_text(steps[-1], self.total_steps)
        self._listeners.tell(ProgressChanged(steps[-1].progress))

    def failed(self, text: str) -> None:
        """The run's job failed: say so, naming the last good checkpoint."""
        last = self.paths.get("last") or self.paths.get("best")
        self.set_message(f"Training failed: {text}" + (f" The last good checkpoint is {last}." if last else ""))

    def feed(self, item: TrainEvent) -> None:
        """One training event: a step waits for the next flush; any other event flushes the steps before it."""
        if not isinstance(item, TrainStep):
            self.flush()
        match item:
            case TrainStep():
                self.pending.append(item)
            case EvalResult():
                self._listeners.tell(EvaluationAdded(item))
            case EvalStarted():  # it may take a minute: say so, or the window looks frozen (Stopping stays said)
                if not self.stopping:
                    self.set_status(wording.evaluating_text(item))
            case TrainHistory():  # a resumed run: its views continue where they were
                self._listeners.tell(StepsAdded(tuple(item.steps)))
                for result in item.evaluations:
                    self._listeners.tell(EvaluationAdded(result))
            case TrainStarted():
                self.total_steps = item.total_steps
                self.device_line = wording.run_where(item.device, item.processes)
                self.set_status(wording.started_text(item))
            case CheckpointSaved():
                self.paths["best" if item.role in ("best", "average") else "last"] = item.path
                self._listeners.tell(CheckpointsChanged())
            case TrainFinished():
                self._finished(item)
            case TrainStopped():
                self.paths["last"] = item.last_path
                self._listeners.tell(CheckpointsChanged())
                self.set_status(wording.stopped_text(item))
            case TrainNote(warning=True):
                self.set_message(f"Warning: {item.message}")
            case TrainNote():
                self._listeners.tell(Announced(item.message))
            case TrainFailed():
                self.set_message(wording.failed_text(item))
            case _:
                assert_never(item)

    def _finished(self, item: TrainFinished) -> None:
        if item.best_path:
            self.paths.setdefault("best", item.best_path)
        self.paths.setdefault("last", item.last_path)
        self._listeners.tell(CheckpointsChanged())
        self.set_status(wording.finished_text(item), fraction=1.0)
        self._listeners.tell(Announced("Training finished"))
