"""What the attention panel shows: ``AttentionSource``, a decode's maps of one quantity (attention, a contribution
view or an attribution) as of a step, with their labels, what to call them and which cells a query may not see."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from attnviz.engine.events import AttentionKind


class AttentionSource(Protocol):
    """A decode's attention as of a step, for the panel to show."""

    @property
    def mergeable(self) -> bool:
        """Whether subword pieces can be merged into words."""
        ...

    def kinds(self) -> list[str]: ...

    def kind_info(self, kind: str) -> AttentionKind:
        """The kind's label and axes."""
        ...

    def describe(self, kind: str) -> tuple[str, str]:
        """(what the title says before the kind, what the caption says of the quantity and its rows)."""
        ...

    def shared(self, kind: str) -> tuple[str, ...]:
        """The kinds whose heads are ``kind``'s heads (a head switched off in one is off in each)."""
        ...

    def kv_heads(self) -> int:
        """Key/value heads under grouped-query attention (0: every head its own)."""
        ...

    def outside(self, kind: str, layer: int, upto: int) -> np.ndarray | None:
        """[R, C] True at the cells ``layer``'s sliding window leaves out (zero by construction), or None."""
        ...

    def future(self, kind: str, upto: int) -> np.ndarray | None:
        """[R, C] True at the cells of the heatmap a query may not see (future decoder inputs), or None."""
        ...

    def maps(self, kind: str, upto: int, merged: bool = False) -> np.ndarray | None:
        """[L, H, R, C] of one kind as of step ``upto``."""
        ...

    def heatmap(self, kind: str, layer: int, head: int | None, upto: int,
                merged: bool = False) -> tuple[np.ndarray, tuple[str, ...], tuple[str, ...], int | None] | None:
        """(matrix [R, C], row labels, column labels, highlighted row) of one layer and head (None: the mean)."""
        ...

    def opens_on_peaked_layer(self, kind: str) -> bool:
        """Whether, with no layer chosen, the panel opens ``kind`` on its most peaked layer (``peaked_layer``) rather
        than the last: an LLM's rows, whose most weight sits on ``<bos>`` and the template, differ most by layer."""
        ...


def peaked_layer(maps: np.ndarray) -> int:
    """The layer of ``maps`` [L, H, R, C] whose mean of heads has the least row entropy relative to its width: the
    one whose rows pick out a few columns, so that the first map shown has structure to see."""
    mean = np.asarray(maps, dtype=np.float64).mean(axis=1)  # [L, R, C]
    rows = mean / np.maximum(np.abs(mean).sum(-1, keepdims=True), 1e-12)
    logs = np.log(np.where(rows > 0, rows, 1.0))
    entropy = -(rows * logs).sum(-1).mean(-1) / np.log(max(maps.shape[-1], 2))  # [L], 0 (one column) .. 1 (even)
    return int(np.argmin(entropy))
