"""Switching attention heads off in a model for the length of a block (which heads: ``engine.heads``).

The model names its attention modules per kind and layer (``attention_modules``); each reads its thread-local
gate (``engine.models.head_gate``) in its forward pass, so a block switches heads off for its own thread only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

from attnviz.engine.errors import InputError
from attnviz.engine.heads import HeadRef, check_heads, gate_values
from attnviz.engine.kinds import kind_of
from attnviz.engine.models.head_gate import set_gate
from attnviz.engine.models.protocol import SearchModel


@contextmanager
def heads_off(model: SearchModel, refs: Iterable[HeadRef], rescale: bool = False) -> Iterator[None]:
    """Within the block, ``model``'s heads ``refs`` are off (as ``engine.heads`` describes); outside it, on again."""
    refs = tuple(refs)
    if not refs:
        yield
        return
    kind = kind_of(model.cfg)
    layout = kind.layout(model.cfg)
    check_heads(refs, layout)
    modules = model.attention_modules()
    missing = sorted({ref.kind for ref in refs} - set(modules))
    if missing:
        raise InputError(f"A {kind.title} cannot switch its {', '.join(missing)} heads off.")
    device = next(model.parameters()).device
    previous: list[tuple[object, Tensor | None]] = []  # restored on leaving, so blocks nest
    try:
        for (attention, layer), values in gate_values(refs, layout, rescale).items():
            gated = modules[attention][layer]
            previous.append((gated, set_gate(gated, torch.tensor(values, device=device))))
        yield
    finally:
        for module, gate in reversed(previous):
            set_gate(module, gate)
