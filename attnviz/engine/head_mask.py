"""Switching attention heads off in a model for the length of a block (which heads: ``engine.heads``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch

from attnviz.engine.errors import InputError
from attnviz.engine.heads import HeadRef, check_heads, gate_values


@contextmanager
def heads_off(model, refs: Iterable[HeadRef], rescale: bool = False) -> Iterator[None]:
    """Within the block, ``model``'s heads ``refs`` are off (as ``engine.heads`` describes); outside it, on again.

    The model names its attention modules per kind and layer (``attention_modules``); each has a ``head_gate``
    attribute (None, or a tensor of one multiplier per head) that its forward pass applies.
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
    previous = []  # restored on leaving, so blocks nest
    try:
        for (kind, layer), values in gate_values(refs, layout, rescale).items():
            module = modules[kind][layer]
            previous.append((module, module.head_gate))
            module.head_gate = torch.tensor(values, device=device)
        yield
    finally:
        for module, gate in reversed(previous):
            module.head_gate = gate
