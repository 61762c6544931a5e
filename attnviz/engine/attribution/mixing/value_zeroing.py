"""Value zeroing (Mohebbi et al. 2023, "Quantifying context mixing in transformers"): a token-to-token
context-mixing map per layer.

For layer l and token j, the layer is run again on its original input with j's value vector (x_j W_V + b_V, every
head) set to zero, the attention weights left as they were; the score of (i, j) is the cosine distance between
token i's original output of the layer and its output without j's value. Rows are then divided by their sum (the
paper's normalisation). Each layer's runs are one batch: row b zeroes token b, and a last row zeroes nothing and is
the reference, so every comparison is with an output computed the same way.

Decoder layers read two contexts: the prefix through self-attention and the source through cross-attention. A
decoder row is scored for every key of both, the source tokens' values zeroed in cross-attention and the decoder
inputs' in self-attention, and normalised over the S + T columns together: the layer's map is [T, S + T], so its
source columns say how much the layer's output for that position rests on the source (the same split ALTI+ makes).
The encoder's maps are [S, S]. The rollout (optional) multiplies the per-layer maps as ALTI+ does (with no
separate residual: value zeroing measures the whole layer).

A decoder-only LLM is one stream (``mixing.stream``: the prompt's slots, then the decoder inputs) and one self-attention
per layer: each output position's row is scored for every stream position and normalised over them all, so it
splits into the prompt's columns and the prefix's. Since the weights are left as they were, zeroing j's value takes
exactly its term A_ij off the attention block's output; the rest of the layer (residual, Gemma's post-norm,
feed-forward) is run again on that (``StreamZeroing``, ``stream_layer``), which equals re-running the layer with the
value zeroed at its probe point (tested) at a fraction of the cost: T x (N + 1) feed-forward rows instead of a whole
layer over N x (N + 1). Names: B batch, L layers, S source, T target, D width, N stream positions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from attnviz.engine.attribution.mixing.alti import decoder_rollout, rollout
from attnviz.engine.attribution.mixing.capture import Capture, Layer
from attnviz.engine.attribution.mixing.stream import StreamCapture, attention_terms
from attnviz.engine.models.probes import Edit, attention_point, edit


def zeroing(first: int, count: int) -> Edit:
    """An edit of a block's value vectors [B', H, Tk, dh] in which batch row ``first + j`` loses key j's value (every
    head), for j < ``count``; the other rows keep theirs."""
    def zero(values: Tensor) -> Tensor:
        out = values.clone()
        rows = torch.arange(count, device=out.device)
        out[first + rows, :, rows] = 0
        return out

    return zero


def _distances(outputs: Tensor, zeroed: int) -> Tensor:
    """Cosine distances [Tq, zeroed] between each query's reference output (the last batch row) and its output
    with key j zeroed (row j); outputs [B', Tq, D]."""
    ref = outputs[-1:].expand(zeroed, -1, -1)  # [zeroed, Tq, D]
    return (1 - F.cosine_similarity(outputs[:zeroed], ref, dim=-1)).clamp(min=0).transpose(0, 1)


def _normalise(scores: Tensor) -> Tensor:
    return scores / scores.sum(-1, keepdim=True).clamp(min=torch.finfo(scores.dtype).tiny)


def encoder_layer(model, layer: Layer, mask: Tensor) -> Tensor:
    """[S, S] raw scores of one encoder layer for one sentence (its input [1, S, D], mask [1, 1, 1, S])."""
    s = layer.x.size(1)
    with edit(model, {attention_point("encoder", layer.index, "v"): zeroing(0, s)}):
        out = model.run_layer("encoder", layer.index, layer.x.expand(s + 1, -1, -1), mask.expand(s + 1, -1, -1, -1))
    return _distances(out, s)


def decoder_layer(model, layer: Layer, memory: Tensor | None, memory_mask: Tensor) -> Tensor:
    """[T, S + T] raw scores of one decoder layer: source keys zeroed in cross-attention, then decoder inputs in
    self-attention (its input [1, T, D], memory [1, S, D] or None)."""
    t = layer.x.size(1)
    s = 0 if memory is None else memory.size(1)
    rows = s + t + 1
    edits = {attention_point("decoder", layer.index, "v"): zeroing(s, t)}
    if memory is not None:  # row j < S loses source key j's value in cross-attention
        edits[attention_point("cross", layer.index, "v")] = zeroing(0, s)
    with edit(model, edits):
        out = model.run_layer("decoder", layer.index, layer.x.expand(rows, -1, -1),
                              memory_mask.expand(rows, -1, -1, -1),
                              None if memory is None else memory.expand(rows, -1, -1))
    return _distances(out, s + t)


@dataclass(frozen=True)
class ZeroingMaps:
    """One sentence's value zeroing (numpy float64): per-layer maps, rows summing to 1, and their rollouts."""

    encoder: np.ndarray | None  # [L, S, S]
    decoder: np.ndarray  # [L, T, S + T]: source columns (cross-attention), then decoder inputs (self-attention)
    encoder_rollout: np.ndarray | None  # [L, S, S]
    total: np.ndarray  # [L, T, S + T] rolled out through the decoder (source through the encoder's rollout)


def value_zeroing_steps(cap: Capture) -> Iterator[int | ZeroingMaps]:
    """Value zeroing of one captured sentence (batch of 1): the number of layers done after each layer (encoder
    first), then the ``ZeroingMaps``."""
    model, enc_layers, dec_layers = cap.model, cap.layers.get("encoder", []), cap.layers["decoder"]
    memory = cap.encoded.memory if enc_layers else None
    enc, dec = [], []
    for layer in enc_layers:
        with torch.inference_mode():
            enc.append(_normalise(encoder_layer(model, layer, cap.mask)))
        yield len(enc)
    for layer in dec_layers:
        with torch.inference_mode():
            dec.append(_normalise(decoder_layer(model, layer, memory, cap.mask)))
        yield len(enc) + len(dec)
    enc_np = torch.stack(enc).double().cpu().numpy() if enc else None
    dec_np = torch.stack(dec).double().cpu().numpy()
    s = dec_np.shape[-1] - dec_np.shape[-2]
    enc_roll = rollout(enc_np) if enc_np is not None else None
    cross = dec_np[..., :s] if enc_roll is not None else None
    yield ZeroingMaps(enc_np, dec_np, enc_roll,
                      decoder_rollout(dec_np[..., s:], cross, None if enc_roll is None else enc_roll[-1]))


def value_zeroing(cap: Capture) -> ZeroingMaps:
    """``value_zeroing_steps`` without the progress."""
    *_, maps = value_zeroing_steps(cap)
    assert isinstance(maps, ZeroingMaps)  # the generator ends with its result
    return maps


@dataclass(frozen=True)
class StreamZeroing:
    """A decoder-only LLM's value zeroing (numpy float64): per layer, the T output positions' rows over the whole
    stream of N positions (the W prompt slots, then the T decoder inputs), each summing to 1."""

    maps: np.ndarray  # [L, T, N]
    width: int  # W

    def split(self, s: int) -> tuple[np.ndarray, np.ndarray]:
        """``Attribution.source`` [L, T, S] (the shown prompt) and ``prefix`` [L, T, T]."""
        t = self.maps.shape[1]
        return (np.ascontiguousarray(self.maps[..., :s]),
                np.ascontiguousarray(self.maps[..., self.width:self.width + t]))


@torch.inference_mode()
def stream_layer(cap: StreamCapture, layer: int) -> Tensor:
    """[T, N] raw scores of one layer of a captured sentence (batch of 1): for output position i and stream
    position j, the cosine distance between i's output of the layer and its output with j's value vector zeroed in
    every key/value head. The weights stay as they were, so zeroing j takes its term A_ij off the attention block's
    output (``stream.attention_terms``); the rest of the layer (residual, Gemma's post-norm, feed-forward) is run
    again on that (``finish_layer``), the T x N variants in one batch beside the reference. A key that no query
    head of row i reads (alpha = 0 in every head: a later position, one outside a sliding window) leaves row i
    unchanged and scores exactly 0."""
    block, rows = cap.blocks[layer], slice(cap.width, None)
    terms, bias = attention_terms(block, rows)  # [1, T, N, D], [1, T, D]
    total = terms.sum(2) + bias  # the block's output before the residual, per output row
    variants = torch.cat([total[0, :, None] - terms[0], total[0, :, None]], 1)  # [T, N + 1, D]: the last unzeroed
    x = block.x[0, rows].to(terms.dtype)[:, None]
    dtype = block.x.dtype
    out = cap.model.finish_layer(layer, x.to(dtype), variants.to(dtype)).to(terms.dtype)  # [T, N + 1, D]
    n = terms.size(2)
    scores = _distances(out.transpose(0, 1), n)  # [T, N]
    return scores.masked_fill(~(block.weights[0, :, rows].amax(0) > 0), 0)


def stream_zeroing_steps(cap: StreamCapture) -> Iterator[int | StreamZeroing]:
    """Value zeroing of a decoder-only LLM's captured sentence over its one stream (``mixing.stream``; batch of 1):
    the layers done after each layer, then the ``StreamZeroing``, each row normalised over the stream."""
    maps = []
    for layer in range(len(cap.blocks)):
        maps.append(_normalise(stream_layer(cap, layer)))
        yield layer + 1
    yield StreamZeroing(torch.stack(maps).double().cpu().numpy(), cap.width)
