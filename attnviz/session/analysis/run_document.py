"""The Analysis tab's head-statistics run, Qt-free: fed the engine's analysis events, it keeps the results (the
loaded model's statistics, a compared checkpoint's, the alignment scores) and the run's progress or failure, and tells
its listeners what changed, so that the tab never relays from its table to its map or its messages.

Listeners are plain callables that ``match`` on ``AnalysisChange``; each record names what changed and the listener
reads the rest from the document.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from attnviz.session.listeners import Listeners

if TYPE_CHECKING:  # the engine's analysis modules import torch: the window opens without them
    from attnviz.engine.analysis.alignment import AlignmentReady
    from attnviz.engine.analysis.stats import HeadStats


@dataclass(frozen=True)
class RunReset:
    """No results: a new run begins (``running``) or the model changed."""

    running: bool


@dataclass(frozen=True)
class Progressed:
    """``done`` of ``total`` sentences of the run's ``phase``."""

    done: int
    total: int
    phase: str


@dataclass(frozen=True)
class StatsArrived:
    """The loaded model's statistics (``compare`` False) or the compared checkpoint's."""

    compare: bool


@dataclass(frozen=True)
class AlignmentArrived:
    """The alignment scores of every head arrived (``alignment``)."""


@dataclass(frozen=True)
class RunFailed:
    """The run ended with ``message`` (its first line): nothing stale is shown."""

    message: str


AnalysisChange: TypeAlias = RunReset | Progressed | StatsArrived | AlignmentArrived | RunFailed
Listener: TypeAlias = Callable[[AnalysisChange], None]


class AnalysisRunDocument:
    """What the last head-statistics run gave: ``stats``, ``stats_b`` (a compared checkpoint), ``alignment``;
    ``failed`` when it ended with a message."""

    def __init__(self) -> None:
        self._listeners: Listeners[AnalysisChange] = Listeners()
        self.stats: HeadStats | None = None
        self.stats_b: HeadStats | None = None
        self.alignment: AlignmentReady | None = None
        self.failed = False

    def subscribe(self, listener: Listener) -> None:
        self._listeners.subscribe(listener)

    def reset(self, running: bool = False) -> None:
        self.stats, self.stats_b, self.alignment, self.failed = None, None, None, False
        self._listeners.tell(RunReset(running))

    def feed(self, event: object) -> None:
        """One event of the engine's analysis job (others are ignored)."""
        from attnviz.engine.analysis.alignment import AlignmentReady  # loaded by the job already: no cost here
        from attnviz.engine.analysis.run import AnalysisProgress, HeadStatsReady

        if isinstance(event, AnalysisProgress):
            self._listeners.tell(Progressed(event.done, event.total, event.phase))
        elif isinstance(event, HeadStatsReady) and event.role == "compare":
            self.stats_b = event.stats
            self._listeners.tell(StatsArrived(compare=True))
        elif isinstance(event, HeadStatsReady):
            self.stats = event.stats
            self._listeners.tell(StatsArrived(compare=False))
        elif isinstance(event, AlignmentReady):
            self.alignment = event
            self._listeners.tell(AlignmentArrived())

    def fail(self, message: str) -> None:
        self.failed, self.stats_b = True, None
        self._listeners.tell(RunFailed(message))
