"""One teacher-forced pass of a Transformer network that keeps what context-mixing methods decompose.

``capture`` runs ``encode`` and ``decode`` once with the attention weights, and records with forward hooks, for
every attention block (encoder self-attention, decoder self-attention, cross-attention; one per layer), the block's
input ``x`` (the residual stream before the block), the value vectors ``x W_V + b_V`` of its keys, its per-head
weights, the head gate of this thread (``engine.search.head_mask``) and the block's output (after its LayerNorm in
a post-LN model, the residual sum in a pre-LN one); and for every layer its input and output (value zeroing
re-runs a layer). Names: B batch, H heads, L layers, S source, T target, D model width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnviz.engine.analysis.contributions import hooked_pass
from attnviz.engine.attribution.forced import forced_ids
from attnviz.engine.models.head_gate import gate_of
from attnviz.engine.models.protocol import Encoded
from attnviz.engine.models.transformer import DecoderLayer, EncoderLayer, MultiHeadAttention, Residual
from attnviz.engine.search.greedy import device_of


@dataclass
class Block:
    """One attention block of one layer, as the pass saw it."""

    attention: MultiHeadAttention
    norm: nn.LayerNorm  # the block's LayerNorm (applied to the input in pre-LN, to the sum in post-LN)
    pre_norm: bool
    x: Tensor  # [B, Tq, D] the residual stream entering the block
    values: Tensor  # [B, Tk, D] x_j W_V + b_V of every key
    weights: Tensor  # [B, H, Tq, Tk] (an off head's row is 0)
    gate: Tensor | None  # [H] the head multipliers in force (None: every head on, weight 1)
    out: Tensor  # [B, Tq, D] the block's output y


@dataclass
class Layer:
    """A whole encoder or decoder layer's input and output (what value zeroing re-runs and compares)."""

    module: EncoderLayer | DecoderLayer
    x: Tensor  # [B, T, D]
    out: Tensor  # [B, T, D]


@dataclass
class Capture:
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


def _blocks_of(model) -> dict[str, list[tuple[MultiHeadAttention, Residual]]]:
    """(attention module, its Residual) per kind and layer."""
    found = {"encoder": [(layer.self_attn, layer.res_attn) for layer in model.encoder_layers()],
             "decoder": [(layer.self_attn, layer.res_self) for layer in model.decoder_layers()]}
    found["cross"] = [(layer.cross_attn, layer.res_cross) for layer in model.decoder_layers()
                      if hasattr(layer, "cross_attn")]
    return found


@torch.inference_mode()
def capture(model, src: Tensor, tgt_in: Tensor) -> Capture:
    """The pass over ``src`` [B, S] and ``tgt_in`` [B, T], with every block and layer recorded."""
    model.eval()
    parts = _blocks_of(model)
    seen: dict[int, list] = {}

    def keep(key: int, what: str):
        def hook(module, args, output):
            first = output[0] if isinstance(output, tuple) else output
            seen.setdefault(key, []).append((what, args[0] if args else None, first))
        return hook

    hooks = []
    for pairs in parts.values():
        for attention, residual in pairs:
            hooks.append(attention.v_proj.register_forward_hook(keep(id(attention), "values")))
            hooks.append(residual.register_forward_hook(keep(id(residual), "block")))
    layer_modules: dict[str, list[EncoderLayer] | list[DecoderLayer]] = {
        "encoder": list(model.encoder_layers()), "decoder": list(model.decoder_layers())}
    for modules in layer_modules.values():
        for module in modules:
            hooks.append(module.register_forward_hook(keep(id(module), "layer")))
    enc, dec = hooked_pass(model, src, tgt_in, hooks)
    weights = {"encoder": enc.attention, "decoder": dec.self_attention, "cross": dec.cross_attention}
    blocks = {kind: [_block(seen, attention, residual, w) for (attention, residual), w in zip(pairs, weights[kind])]
              for kind, pairs in parts.items() if pairs}
    layers = {kind: [Layer(m, seen[id(m)][0][1], seen[id(m)][0][2]) for m in modules]
              for kind, modules in layer_modules.items() if modules}
    return Capture(enc, dec.hidden, enc.mask, blocks, layers)


def _block(seen: dict[int, list], attention: MultiHeadAttention, residual: Residual, weights: Tensor) -> Block:
    (_, x, out), = seen[id(residual)]  # one call per pass
    (_, _, values), = seen[id(attention)]  # self-attention: its keys; cross: the memory, once in ``start``
    return Block(attention, residual.norm, residual.pre_norm, x, values, weights, gate_of(attention), out)
