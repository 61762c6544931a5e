"""Value zeroing (Mohebbi et al. 2023, "Quantifying context mixing in transformers"): a token-to-token
context-mixing map per layer.

For layer l and key j, the layer is run again on its original input with j's value vector zeroed in every
key/value head (at the block's ``v`` probe point), the attention weights left as they were; the score of (i, j) is
the cosine distance between query i's original output of the layer and its output without j's value. Rows are then
divided by their sum (the paper's normalisation). Each layer's runs are batches in which row b zeroes key b and a
last row zeroes nothing and is the reference, so every comparison is with an output computed the same way. A key
that no head of row i reads (alpha = 0 in every head: a masked pad, a later position, one outside a sliding
window) leaves row i unchanged and scores exactly 0.

A layer reads one or two contexts (``contexts``): an encoder layer its source, a decoder layer the source through
cross-attention and the prefix through self-attention. A decoder row is scored for every key of both, the source
tokens' values zeroed in cross-attention and the decoder inputs' in self-attention, and normalised over the S + T
columns together: the layer's map is [T, S + T], so its source columns say how much the layer's output rests on the
source (the split ALTI+ makes). A one-stream network (a decoder-only LLM, ``capture``) reads one context, its whole
stream of N positions; only its T output positions are scored (``run_layer``'s ``rows``: the prompt's rows are not
computed), so its map is [T, N], each row splitting into the shown prompt's columns and the prefix's. An
encoder-decoder's maps are rolled out as ALTI+ does (with no separate residual: value zeroing measures the whole
layer); a stream's are not, its prompt rows not being scored. Names: B batch, L layers, S source, T target, N stream
positions, W prompt slots, D width.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from attnviz.engine.attribution.mixing.alti import decoder_rollout, rollout
from attnviz.engine.attribution.mixing.capture import STREAM, Capture, Layer
from attnviz.engine.models.probes import Edit, attention_point, edit

RUN_BYTES = 512 * 2 ** 20  # what one batch of a layer's re-runs may hold of its widest activation (``_run``)


def zeroing(first: int, count: int, start: int = 0) -> Edit:
    """An edit of a block's value vectors [B', G, Tk, dh] in which batch row ``first + j`` loses key ``start + j``'s
    value (every key/value head), for j < ``count``; the other rows keep theirs."""
    def zero(values: Tensor) -> Tensor:
        out = values.clone()
        rows = torch.arange(count, device=out.device)
        out[first + rows, :, start + rows] = 0
        return out

    return zero


def variants_zeroing(count: int, start: int = 0) -> Edit:
    """An edit of one pass's value vectors [1, G, Tk, dh] into ``count + 1`` variants: variant j without key
    ``start + j``'s value (every key/value head), the last as it was. A network that takes variants of its values
    (a one-stream network's ``run_layer``) computes the layer's weights and every key's projections once."""
    def zero(values: Tensor) -> Tensor:
        out = values.expand(count + 1, *values.shape[1:]).clone()
        rows = torch.arange(count, device=out.device)
        out[rows, :, start + rows] = 0
        return out

    return zero


def _distances(outputs: Tensor, zeroed: int) -> Tensor:
    """Cosine distances [Tq, zeroed] between each query's reference output (the last batch row) and its output
    with key j zeroed (row j); outputs [zeroed + 1, Tq, D]. Taken in float32 at least: 1 - cos of a half-precision
    pair near 1 is all rounding."""
    outputs = outputs.float() if outputs.dtype in (torch.float16, torch.bfloat16) else outputs
    ref = outputs[-1:].expand(zeroed, -1, -1)  # [zeroed, Tq, D]
    return (1 - F.cosine_similarity(outputs[:zeroed], ref, dim=-1)).clamp(min=0).transpose(0, 1)


def _normalise(scores: Tensor) -> Tensor:
    return scores / scores.sum(-1, keepdim=True).clamp(min=torch.finfo(scores.dtype).tiny)


@dataclass(frozen=True)
class Context:
    """Keys a layer reads through one attention block: ``count`` of them, zeroed at ``point``; ``readable`` [Tq,
    count] True where some head of the query row gives the key a weight."""

    point: str
    count: int
    readable: Tensor


def scored_rows(cap: Capture) -> slice:
    """The query rows a layer's map scores: every one, or a one-stream capture's output positions."""
    return slice(cap.width, None) if STREAM in cap.blocks else slice(None)


def contexts(cap: Capture, layer: Layer) -> list[Context]:
    """What ``layer`` reads, in its map's column order: the source (encoder layers; a decoder layer's
    cross-attention), then the prefix (a decoder layer's self-attention); a one-stream layer its stream."""
    def context(kind: str, block_kind: str) -> Context:
        weights = cap.blocks[block_kind][layer.index].weights[0][:, scored_rows(cap)]  # [H, Tq, Tk]
        return Context(attention_point(kind, layer.index, "v"), weights.size(-1), weights.amax(0) > 0)

    if STREAM in cap.blocks:
        return [context("decoder", STREAM)]
    if layer.side == "encoder":
        return [context("encoder", "encoder")]
    return [*([context("cross", "cross")] if "cross" in cap.blocks else []), context("decoder", "decoder")]


def _run(cap: Capture, layer: Layer, point: str, count: int, start: int) -> Tensor:
    """The layer run again with keys ``start``.. ``start + count`` zeroed one a row at ``point``, and a last row
    with none: outputs [count + 1, Tq, D]. A one-stream layer runs once, its values made variants
    (``variants_zeroing``); an encoder-decoder's over as many copies of its input."""
    mask, memory, rows = cap.mask, cap.encoded.memory, count + 1
    if STREAM in cap.blocks:
        with edit(cap.model, {point: variants_zeroing(count, start)}):
            return cap.model.run_layer("decoder", layer.index, layer.x, rows=scored_rows(cap))
    with edit(cap.model, {point: zeroing(0, count, start)}):
        if layer.side == "encoder":
            return cap.model.run_layer("encoder", layer.index, layer.x.expand(rows, -1, -1),
                                       mask.expand(rows, -1, -1, -1))
        has_memory = "cross" in cap.blocks
        return cap.model.run_layer("decoder", layer.index, layer.x.expand(rows, -1, -1),
                                   mask.expand(rows, -1, -1, -1), memory.expand(rows, -1, -1) if has_memory else None)


@torch.inference_mode()
def layer_scores(cap: Capture, layer: Layer) -> Tensor:
    """[Tq, K] raw scores of one layer of a captured sentence (batch of 1) for its ``scored_rows``, K the keys of its
    ``contexts`` side by side, re-run in batches of at most ``RUN_BYTES`` (each with its own reference row)."""
    found = contexts(cap, layer)
    width = max(cap.model.cfg.ff_dim, layer.x.size(-1))
    per_batch = max(1, RUN_BYTES // (4 * layer.x.size(1) * width) - 1)
    parts = []
    for ctx in found:
        for start in range(0, ctx.count, per_batch):
            count = min(per_batch, ctx.count - start)
            out = _run(cap, layer, ctx.point, count, start)
            parts.append(_distances(out, count))
    readable = torch.cat([ctx.readable for ctx in found], -1)
    return torch.cat(parts, -1).masked_fill(~readable, 0)


@dataclass(frozen=True)
class ZeroingMaps:
    """One sentence's value zeroing (numpy float64): per-layer maps, rows summing to 1, and their rollouts."""

    encoder: np.ndarray | None  # [L, S, S]
    decoder: np.ndarray  # [L, T, S + T]: source columns (cross-attention; a stream's prompt), then decoder inputs
    encoder_rollout: np.ndarray | None  # [L, S, S]
    total: np.ndarray | None  # [L, T, S + T] rolled out through the decoder (None for a stream)
    stream: np.ndarray | None = None  # [L, T, N] a one-stream capture's output rows over its whole stream


def _maps(cap: Capture, done: dict[str, list[Tensor]]) -> ZeroingMaps:
    np_maps = {side: torch.stack(maps).double().cpu().numpy() for side, maps in done.items() if maps}
    if STREAM in np_maps:
        maps, t = np_maps[STREAM], cap.hidden.size(1)  # [L, T, N]
        return ZeroingMaps(None, np.concatenate([maps[..., :cap.width], maps[..., cap.width:cap.width + t]], -1),
                           None, None, maps)
    enc, dec = np_maps.get("encoder"), np_maps["decoder"]
    s = dec.shape[-1] - dec.shape[-2]
    enc_roll = rollout(enc) if enc is not None else None
    cross = dec[..., :s] if enc_roll is not None else None
    return ZeroingMaps(enc, dec, enc_roll,
                       decoder_rollout(dec[..., s:], cross, None if enc_roll is None else enc_roll[-1]))


def value_zeroing_steps(cap: Capture) -> Iterator[int | ZeroingMaps]:
    """Value zeroing of one captured sentence (batch of 1): the number of layers done after each layer (encoder
    first), then the ``ZeroingMaps``."""
    done: dict[str, list[Tensor]] = {side: [] for side in cap.layers}
    count = 0
    for side, layers in cap.layers.items():
        for layer in layers:
            done[side].append(_normalise(layer_scores(cap, layer)))
            count += 1
            yield count
    yield _maps(cap, done)


def value_zeroing(cap: Capture) -> ZeroingMaps:
    """``value_zeroing_steps`` without the progress."""
    *_, maps = value_zeroing_steps(cap)
    assert isinstance(maps, ZeroingMaps)  # the generator ends with its result
    return maps
