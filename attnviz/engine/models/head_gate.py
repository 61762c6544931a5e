"""Head gates: the per-thread multipliers through which an attention module's heads are switched off.

An attention module that can switch heads off mixes in ``HeadGated`` and multiplies its heads by ``head_gate`` in
its forward pass; ``engine.search.head_mask.heads_off`` sets the gates for the length of a block (which heads:
``engine.heads``). The gates are thread-local: a block switches heads off for the model calls of its own thread
only, so two decodes of one model in two threads (the app's main decode with heads off and its every-head-on
comparison) never see each other's heads.
"""

from __future__ import annotations

import threading

from torch import Tensor

_local = threading.local()


def _gates() -> dict[int, Tensor]:
    gates: dict[int, Tensor] = _local.__dict__.setdefault("gates", {})
    return gates


def gate_of(module: object) -> Tensor | None:
    """This thread's gate for an attention module ([H] multipliers), or None while every head is on."""
    return _gates().get(id(module))


def set_gate(module: object, gate: Tensor | None) -> Tensor | None:
    """Set this thread's gate of ``module`` (None: every head on again); returns the gate it replaces, so blocks
    nest."""
    gates = _gates()
    previous = gates.pop(id(module), None)
    if gate is not None:
        gates[id(module)] = gate
    return previous


class HeadGated:
    """Mixin of an attention module whose heads can be switched off: ``head_gate`` is this thread's gate."""

    @property
    def head_gate(self) -> Tensor | None:
        return gate_of(self)
