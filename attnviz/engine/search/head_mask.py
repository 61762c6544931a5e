"""Switching attention heads off in a model for the length of a block (which heads: ``engine.heads``).

A head is switched off by a ``HeadScale`` edit of its block's ``weights`` probe point (``engine.models.probes``) that
zeroes them, and with ``rescale`` the others' outputs are multiplied by H / (H - off) by a ``HeadScale`` of the
block's ``heads`` point (their weights, which the views show, stay a distribution). Edits are scoped to the thread:
two decodes of one model in two threads (the app's main decode with heads off and its every-head-on comparison)
never see each other's heads. A scale keeps the fused attention path, so a search with heads off is as fast as one
without.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch

from attnviz.engine.errors import InputError
from attnviz.engine.heads import HeadRef, check_heads, gate_values
from attnviz.engine.kinds import kind_of
from attnviz.engine.models.probes import HeadScale, attention_point, edit, probe_names
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
    refs = tuple(sorted({HeadRef(carrier, r.layer, r.head) for r in refs
                         for carrier in kind.same_heads.get(r.kind, (r.kind,))}))
    offered = set(probe_names(model))
    missing = sorted({ref.kind for ref in refs if attention_point(ref.kind, ref.layer, "weights") not in offered})
    if missing:
        raise InputError(f"A {kind.title} cannot switch its {', '.join(missing)} heads off.")
    device = next(model.parameters()).device
    edits = {}
    for (attention, layer), values in gate_values(refs, layout, rescale).items():
        gate = torch.tensor(values, device=device)
        edits[attention_point(attention, layer, "weights")] = HeadScale((gate != 0).to(gate.dtype))  # off: zero
        if rescale:  # the others' outputs times H / (H - off); their weights stay a distribution
            edits[attention_point(attention, layer, "heads")] = HeadScale(gate)
    with edit(model, edits):
        yield
