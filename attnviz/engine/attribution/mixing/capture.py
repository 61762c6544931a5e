"""One teacher-forced pass of a Transformer network that keeps what context-mixing methods decompose.

``capture`` runs ``encode`` and ``decode`` once and records through the network's probe points
(``engine.models.probes``), for every attention block, the block's input ``x`` (the residual stream before the
block), the value vectors of its key/value heads, its per-head weights as the block used them (a head switched off
in this thread has zero weights; a head rescaled in this thread, ``head_scales``, has its factor multiplied in) and
the stream after the block (the residual sum, or its LayerNorm in a post-LN model); and for every layer its input
and output (value zeroing re-runs a layer). The block's output projection and norm come from the network
(``attention_block``).

**Two streams and a cross block, or one stream.** An encoder-decoder's blocks are its encoder self-attention, its
decoder self-attention and its cross-attention, one per layer each. A network whose decoder continues the encoder's
positions (``one_stream``: a decoder-only LLM, whose prompt's pass and output steps run the same layers) has one
self-attention per layer over one stream of N = W + T positions: the W prompt slots the prompt's pass reads (the
shown prompt, every token but its last), then the T decoder inputs (the first is the prompt's last token, fed where
an encoder-decoder feeds ``<sos>``). Its pass records the prompt's rows (``enc.{l}.*``) and the output steps'
(``dec.{l}.*``) and joins them: the weights [N, N] hold the prompt's rows over the prompt's columns and the
output's rows over the prompt and the output so far (one softmax). Names: B batch, H query heads, G key/value
heads, L layers, S source, T target, N stream positions, W prompt slots, D model width, dh head width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from attnviz.engine.attribution.forced import forced_ids
from attnviz.engine.kinds import kind_of
from attnviz.engine.models.probes import Captured, attention_point, head_scales, layer_point
from attnviz.engine.models.probes import capture as probe_capture
from attnviz.engine.models.protocol import AttentionBlock, Encoded, SearchModel
from attnviz.engine.search.torch_batch import device_of

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

STREAM = "stream"  # the one block kind of a ``one_stream`` network
SIDES = ("encoder", "decoder")  # a one-stream network's passes: the prompt's, then the output steps'


@dataclass
class Block:
    """One attention block of one layer, as the pass saw it."""

    params: AttentionBlock  # its output projection, head groups and norm
    x: Tensor  # [B, Tq, D] the residual stream entering the block
    values: Tensor  # [B, G, Tk, dh] every key's value vector in each key/value head
    weights: Tensor  # [B, H, Tq, Tk] as they act (an off head's row is 0, a rescaled head's times its factor)
    out: Tensor  # [B, Tq, D] the stream after the block
    self_attention: bool  # a query's own position is key i (its residual); else (cross) the residual is apart


@dataclass
class Layer:
    """A whole layer's input and output (what value zeroing re-runs and compares)."""

    side: str  # "encoder" or "decoder" (a one-stream network's layers: "decoder", over the whole stream)
    index: int
    x: Tensor  # [B, T, D]
    out: Tensor  # [B, T, D]


@dataclass
class Capture:
    model: SearchModel  # the network the pass ran (value zeroing re-runs its layers)
    encoded: Encoded
    hidden: Tensor  # [B, T, D] the decoder's output (what ``project`` reads)
    mask: Tensor  # [B, 1, 1, S] True at real source tokens
    blocks: dict[str, list[Block]]  # "encoder", "decoder" (self), "cross"; or "stream" -> one block per layer
    layers: dict[str, list[Layer]]  # "encoder", "decoder"; or "stream" -> one per layer
    width: int = 0  # W: a one-stream capture's prompt slots before the decoder inputs

    @property
    def cross(self) -> Tensor:
        """[B, H, T, S]: the last layer's output rows over the source (a one-stream network's over its prompt)."""
        if STREAM in self.blocks:
            return self.blocks[STREAM][-1].weights[:, :, self.width:, :self.width]
        return self.blocks["cross"][-1].weights


def teacher_forced_ids(translator: Translator, src_tokens: Sequence[str], tokens: Sequence[str]
                       ) -> tuple[Tensor, Tensor]:
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


def _block_names(kind: str, layer: int) -> list[str]:
    return [_block_input(kind, layer), *(attention_point(kind, layer, p) for p in ("v", "weights", "resid"))]


def _weights(model: SearchModel, seen: Captured, kind: str, layer: int) -> Tensor:
    weights, scales = seen[attention_point(kind, layer, "weights")], head_scales(model, attention_point(kind, layer,
                                                                                                        "heads"))
    return weights if scales is None else weights * scales.to(weights.dtype)[:, None, None]


def _block(model: SearchModel, seen: Captured, kind: str, layer: int) -> Block:
    return Block(model.attention_block(kind, layer), seen[_block_input(kind, layer)],
                 seen[attention_point(kind, layer, "v")], _weights(model, seen, kind, layer),
                 seen[attention_point(kind, layer, "resid")], kind != "cross")


def _stream_block(model: SearchModel, seen: Captured, layer: int) -> Block:
    def both(point: str, dim: int) -> Tensor:
        return torch.cat([seen[attention_point(side, layer, point)] for side in SIDES], dim)

    prompt, steps = (_weights(model, seen, side, layer) for side in SIDES)
    weights = torch.cat([F.pad(prompt, (0, steps.size(2))), steps.to(prompt.dtype)], 2)  # [B, H, W + T, W + T]
    x = torch.cat([seen[layer_point(side, layer, "in")] for side in SIDES], 1)
    return Block(model.attention_block("decoder", layer), x, both("v", 2), weights, both("resid", 1), True)


@torch.inference_mode()
def capture(model: SearchModel, src: Tensor, tgt_in: Tensor) -> Capture:
    """The pass over ``src`` [B, S] and ``tgt_in`` [B, T], with every block and layer recorded."""
    model.eval()
    if model.one_stream:
        return _capture_stream(model, src, tgt_in)
    kinds = {kind: layers for kind, (layers, _) in kind_of(model.cfg).layout(model.cfg).items()}
    sides: dict[str, int] = {side: kinds[side] for side in SIDES if side in kinds}
    names = [name for kind, n in kinds.items() for layer in range(n) for name in _block_names(kind, layer)]
    names += [layer_point(side, i, point) for side, n in sides.items() for i in range(n) for point in ("in", "out")]
    with probe_capture(model, names) as seen:
        enc = model.encode(src)
        dec = model.decode(tgt_in, enc)
    blocks = {kind: [_block(model, seen, kind, layer) for layer in range(n)] for kind, n in kinds.items()}
    layers = {side: [Layer(side, i, seen[layer_point(side, i, "in")], seen[layer_point(side, i, "out")])
                     for i in range(n)] for side, n in sides.items()}
    return Capture(model, enc, dec.hidden, enc.mask, blocks, layers)


def _capture_stream(model: SearchModel, src: Tensor, tgt_in: Tensor) -> Capture:
    """A one-stream network's pass over the prompt ``src`` [B, S + 1] (its last token the first decoder input) and
    the decoder inputs ``tgt_in`` [B, T], its two passes joined into one stream per layer."""
    count = model.cfg.dec_layers
    names = [name for layer in range(count) for side in SIDES
             for name in (*_block_names(side, layer), layer_point(side, layer, "out"))]
    with probe_capture(model, names) as seen:
        enc = model.encode(src)
        dec = model.decode(tgt_in, enc)
    width = seen[layer_point("encoder", 0, "in")].size(1)
    blocks = [_stream_block(model, seen, layer) for layer in range(count)]
    layers = [Layer("decoder", layer, blocks[layer].x, torch.cat([seen[layer_point(side, layer, "out")]
                                                                  for side in SIDES], 1)) for layer in range(count)]
    return Capture(model, enc, dec.hidden, enc.mask, {STREAM: blocks}, {STREAM: layers}, width)
