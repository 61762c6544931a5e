"""What a ``DecodeDocument`` tells its listeners: one frozen record per kind of change, in the order they happen.

Listeners are plain callables that ``match`` on ``DocumentChange``; the records name what changed (a step, a node),
and the listener reads the rest from the document.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from attnviz.engine.events import EncoderPass


@dataclass(frozen=True)
class Cleared:
    """No decode, or a new one just asked: every view empties."""


@dataclass(frozen=True)
class Encoded:
    """The decode's encoder pass arrived: the source is known and the tree has its root."""

    encoder: EncoderPass


@dataclass(frozen=True)
class StepAdded:
    """The main path grew by step ``index``, and so did the hypothesis shown."""

    index: int


@dataclass(frozen=True)
class TreeGrew:
    """Nodes joined the tree: candidates of a beam step (``branch`` 0) or of what-if branch ``branch``."""

    nodes: tuple[int, ...]
    branch: int


@dataclass(frozen=True)
class SearchRanked:
    """The beam search ended and ranked its finished hypotheses; ``chosen`` is its answer."""

    chosen: int | None


@dataclass(frozen=True)
class PathShown:
    """The hypothesis shown is now the path to ``node``, shown at its last step."""

    node: int


@dataclass(frozen=True)
class StepShown:
    """The step shown moved to ``step``."""

    step: int


@dataclass(frozen=True)
class Finished:
    """The decode ended (it may have failed: then some events never came)."""


DocumentChange: TypeAlias = Cleared | Encoded | StepAdded | TreeGrew | SearchRanked | PathShown | StepShown | Finished
Listener: TypeAlias = Callable[[DocumentChange], None]
