"""One teacher-forced pass of a Transformer network that keeps what context-mixing methods decompose.

``capture`` runs ``encode`` and ``decode`` once with the attention weights and records through the network's probe
points (``engine.models.probes``), for every attention block (encoder self-attention, decoder self-attention,
cross-attention; one per layer), the block's input ``x`` (the residual stream before the block), the value vectors
``x W_V + b_V`` of its keys, its per-head weights as the block used them (a head switched off in this thread has
zero weights; a head rescaled in this thread, ``head_scales``, has its factor multiplied in) and the block's output
(after its LayerNorm in a post-LN model, the residual sum in a pre-LN one); and for every layer its input and output
(value zeroing re-runs a layer). The block's output projection and LayerNorm come from the network
(``attention_block``). Names: B batch, H heads, L layers, S source, T target, D model width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from attnviz.engine.attribution.forced import forced_ids
from attnviz.engine.kinds import kind_of
from attnviz.engine.models.probes import Captured, attention_point, head_scales, layer_point
from attnviz.engine.models.probes import capture as probe_capture
from attnviz.engine.models.protocol import AttentionBlock, Encoded, SearchModel
from attnviz.engine.search.greedy import device_of


@dataclass
class Block:
    """One attention block of one layer, as the pass saw it."""

    params: AttentionBlock  # its output projection and LayerNorm
    x: Tensor  # [B, Tq, D] the residual stream entering the block
    values: Tensor  # [B, Tk, D] x_j W_V + b_V of every key
    weights: Tensor  # [B, H, Tq, Tk] as they act (an off head's row is 0, a rescaled head's times its factor)
    out: Tensor  # [B, Tq, D] the block's output y


@dataclass
class Layer:
    """A whole encoder or decoder layer's input and output (what value zeroing re-runs and compares)."""

    side: str  # "encoder" or "decoder"
    index: int
    x: Tensor  # [B, T, D]
    out: Tensor  # [B, T, D]


@dataclass
class Capture:
    model: SearchModel  # the network the pass ran (value zeroing re-runs its layers)
    encoded: Encoded
    hidden: Tensor  # [B, T, D] the decoder's output (what ``project`` reads)
    mask: Tensor  # [B, 1, 1, S] True at real source tokens
    blocks: dict[str, list[Block]]  # "encoder", "decoder" (self), "cross" -> one block per layer
    layers: dict[str, list[Layer]]  # "encoder", "decoder" -> one per layer


def teacher_forced_ids(translator, src_tokens: Sequence[str], tokens: Sequence[str]) -> tuple[Tensor, Tensor]:
    """[1, S] source ids and [1, T] decoder inputs (``<sos>`` then every output token but the last), checked as
    every attribution method checks them (``attribution.forced``), on the model's device."""
    forced = forced_ids(translator, src_tokens, tokens)
    device = device_of(translator.model)
    return forced.src[None].to(device), forced.tgt_in[None].to(device)


def _block_input(kind: str, layer: int) -> str:
    """The probe point holding the residual stream that enters a block: the layer's input, or (cross-attention)
    the stream after the decoder's self-attention block."""
    if kind == "cross":
        return attention_point("decoder", layer, "resid")
    return layer_point(kind, layer, "in")


def _values(v: Tensor) -> Tensor:
    return v.transpose(1, 2).flatten(2)  # [B, H, Tk, dh] -> [B, Tk, D]


@torch.inference_mode()
def capture(model, src: Tensor, tgt_in: Tensor) -> Capture:
    """The pass over ``src`` [B, S] and ``tgt_in`` [B, T], with every block and layer recorded."""
    model.eval()
    kinds = {kind: layers for kind, (layers, _) in kind_of(model.cfg).layout(model.cfg).items()}
    sides: dict[str, int] = {side: kinds[side] for side in ("encoder", "decoder") if side in kinds}
    names = [name for kind, n in kinds.items() for layer in range(n)
             for name in (_block_input(kind, layer), *(attention_point(kind, layer, p) for p in ("v", "weights",
                                                                                                  "resid")))]
    names += [layer_point(side, i, point) for side, n in sides.items() for i in range(n) for point in ("in", "out")]
    with probe_capture(model, names) as seen:
        enc = model.encode(src)
        dec = model.decode(tgt_in, enc)
    blocks = {kind: [_block(model, seen, kind, layer) for layer in range(n)] for kind, n in kinds.items()}
    layers = {side: [Layer(side, i, seen[layer_point(side, i, "in")], seen[layer_point(side, i, "out")])
                     for i in range(n)] for side, n in sides.items()}
    return Capture(model, enc, dec.hidden, enc.mask, blocks, layers)


def _block(model, seen: Captured, kind: str, layer: int) -> Block:
    point = lambda name: seen[attention_point(kind, layer, name)]  # noqa: E731 (one call per pass)
    weights, scales = point("weights"), head_scales(model, attention_point(kind, layer, "heads"))
    if scales is not None:  # heads rescaled in this thread: each head's terms carry its factor
        weights = weights * scales.to(weights.dtype)[:, None, None]
    return Block(model.attention_block(kind, layer), seen[_block_input(kind, layer)], _values(point("v")),
                 weights, point("resid"))
