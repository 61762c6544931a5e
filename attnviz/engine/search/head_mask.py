"""Switching attention heads off in a model for the length of a block (which heads: ``engine.heads``).

The gates are thread-local: a block switches heads off for the model calls of its own thread only, so two decodes
of one model in two threads (the app's main decode with heads off and its every-head-on comparison) never see each
other's heads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch

from attnviz.engine.errors import InputError
from attnviz.engine.heads import HeadRef, check_heads, gate_values

_local = threading.local()


def gate_of(module) -> torch.Tensor | None:
    """This thread's gate for an attention module ([H] multipliers), or None while every head is on."""
    gates = getattr(_local, "gates", None)
    return gates.get(id(module)) if gates else None


class HeadGated:
    """Mixin of an attention module whose heads can be switched off: ``head_gate`` is this thread's gate."""

    @property
    def head_gate(self) -> torch.Tensor | None:
        return gate_of(self)


@contextmanager
def heads_off(model, refs: Iterable[HeadRef], rescale: bool = False) -> Iterator[None]:
    """Within the block, ``model``'s heads ``refs`` are off (as ``engine.heads`` describes); outside it, on again.

    The model names its attention modules per kind and layer (``attention_modules``); each reads its
    ``head_gate`` (None, or a tensor of one multiplier per head, for the calling thread) in its forward pass.
    """
    refs = tuple(refs)
    if not refs:
        yield
        return
    layout = model.cfg.model_kind.layout(model.cfg)
    check_heads(refs, layout)
    modules = model.attention_modules()
    missing = sorted({ref.kind for ref in refs} - set(modules))
    if missing:
        raise InputError(f"A {model.cfg.model_kind.title} cannot switch its {', '.join(missing)} heads off.")
    device = next(model.parameters()).device
    gates = _local.__dict__.setdefault("gates", {})
    previous = []  # restored on leaving, so blocks nest
    try:
        for (kind, layer), values in gate_values(refs, layout, rescale).items():
            key = id(modules[kind][layer])
            previous.append((key, gates.get(key)))
            gates[key] = torch.tensor(values, device=device)
        yield
    finally:
        for key, gate in reversed(previous):
            if gate is None:
                gates.pop(key, None)
            else:
                gates[key] = gate
