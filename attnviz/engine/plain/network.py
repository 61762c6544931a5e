"""attnviz's post-norm Transformer (kind ``marian``) in numpy, for plain translation: no attention weights kept, no
probe points, float32, over the weights as stored (``engine.plain.weights``).

It computes what ``engine.models.transformer`` computes for a MarianMT folder: token embeddings scaled by sqrt(D)
plus Marian's sinusoids (sin in the first half, cos in the second), post-LN layers ``LN(x + f(x))``, the feed-forward
activation, and the tied or separate output projection with ``final_logits_bias``. Rows stay in Marian's order and
ids are mapped instead (``src_rows``/``tgt_rows``: the Marian row behind each attnviz id), so the embedding is never
reordered or copied; the logits come out in Marian's column order (``engine.plain.search`` maps them). A layer's
query, key and value projections are joined into one product (one small copy of those weights). Sums run in
another order than torch's, so a logit may differ in its last bits (``engine.plain`` says what that means for the
tokens). Names: B sentences, N rows (B x hypotheses), H heads, S source length, D width, dh = D / H.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

Array = np.ndarray
ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "relu": lambda x: np.maximum(x, 0, out=x),
    "swish": lambda x: x * (0.5 + 0.5 * np.tanh(0.5 * x)),  # x * sigmoid(x), with no overflow for large -x
    "silu": lambda x: x * (0.5 + 0.5 * np.tanh(0.5 * x)),
    "gelu_new": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
}


def halves_table(n: int, d: int) -> Array:
    """[n, d] Marian's sinusoids (every sin, then every cos), computed in float64 as ``sinusoid_table`` does."""
    freq = np.power(10000.0, -np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.arange(n, dtype=np.float64)[:, None] * freq[None, :]
    table = np.zeros((n, d), dtype=np.float64)
    table[:, :angles.shape[1]] = np.sin(angles)
    table[:, angles.shape[1]:] = np.cos(angles[:, :d // 2])
    return table.astype(np.float32)


def layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, -1, keepdims=True)
    return centred / np.sqrt(var + eps) * weight + bias


def softmax(scores: Array) -> Array:
    """Softmax over the last axis, in place; a row of -inf only (never: a key is always visible) would give NaN."""
    scores -= scores.max(-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(-1, keepdims=True)
    return scores


@dataclass
class Block:
    """One attention block: its joined input projection (q, k, v; or k, v of cross-attention's memory, with
    ``query`` apart), its output projection and its residual LayerNorm."""

    joined: Dense
    out: Dense
    norm: tuple[Array, Array]
    query: Dense | None = None


@dataclass
class Layer:
    attn: Block
    cross: Block | None
    ff: tuple[Dense, Dense]  # fc1, fc2
    ff_norm: tuple[Array, Array]


SMALL = 32  # rows up to which a product runs block by block (OpenBLAS's small products repack the whole weight)
BLOCK = 128  # weight rows a block: measured fastest for 5-15 rows of OPUS-MT's products (docs/benchmarks.md)


class Dense:
    """A linear layer ``x @ weight.T + bias`` over a stored weight [out, in]. Up to ``SMALL``
    rows it multiplies ``BLOCK`` weight rows at a time (one batched call over the weight's blocks, views of it) and
    then the rest: 2-3x faster than one product there; more rows take one product."""

    def __init__(self, weight: Array, bias: Array):
        self.weight, self.bias = weight, bias
        whole = weight.shape[0] // BLOCK * BLOCK
        self.blocks = weight[:whole].reshape(-1, BLOCK, weight.shape[1]) if whole else None
        self.rest = weight[whole:]

    def __call__(self, x: Array) -> Array:
        flat = x.reshape(-1, x.shape[-1])
        if self.blocks is None or flat.shape[0] > SMALL:
            out = flat @ self.weight.T
        else:
            columns = np.ascontiguousarray(flat.T)
            out = np.matmul(self.blocks, columns).reshape(-1, flat.shape[0]).T
            if self.rest.shape[0]:
                out = np.concatenate([out, (self.rest @ columns).T], axis=1)
            else:
                out = np.ascontiguousarray(out)
        out += self.bias
        return out.reshape(*x.shape[:-1], out.shape[-1])


def _block(w: Mapping[str, Array], prefix: str, norm: str, cross: bool) -> Block:
    get = lambda part, p: w[f"{prefix}.{part}.{p}"]  # noqa: E731
    names = ("k_proj", "v_proj") if cross else ("q_proj", "k_proj", "v_proj")
    joined = Dense(np.concatenate([get(n, "weight") for n in names]), np.concatenate([get(n, "bias") for n in names]))
    query = Dense(get("q_proj", "weight"), get("q_proj", "bias")) if cross else None
    return Block(joined, Dense(get("out_proj", "weight"), get("out_proj", "bias")),
                 (w[f"{norm}.weight"], w[f"{norm}.bias"]), query)


def build_layers(w: Mapping[str, Array], side: str, count: int) -> list[Layer]:
    """A side's layers from Marian's weight names (``engine.hub.marian_files.LAYER_PARTS``)."""
    layers = []
    for i in range(count):
        p = f"model.{side}.layers.{i}"
        cross = _block(w, f"{p}.encoder_attn", f"{p}.encoder_attn_layer_norm", True) if side == "decoder" else None
        ff = (Dense(w[f"{p}.fc1.weight"], w[f"{p}.fc1.bias"]), Dense(w[f"{p}.fc2.weight"], w[f"{p}.fc2.bias"]))
        layers.append(Layer(_block(w, f"{p}.self_attn", f"{p}.self_attn_layer_norm", False), cross, ff,
                            (w[f"{p}.final_layer_norm.weight"], w[f"{p}.final_layer_norm.bias"])))
    return layers


def split_heads(x: Array, heads: int) -> Array:
    """[..., T, D] -> [..., H, T, dh]."""
    *lead, t, d = x.shape
    return np.moveaxis(x.reshape(*lead, t, heads, d // heads), -2, -3)


@dataclass
class Cache:
    """What decoding keeps: each layer's cross-attention keys and values [B, H, S, dh] (one set per sentence, shared
    by its ``hyps`` rows), the additive source mask [B, 1, 1, S], and self-attention keys and values
    [N, H, capacity, dh] of which ``length`` positions are filled."""

    cross: list[tuple[Array, Array]]
    mask: Array
    selfs: list[tuple[Array, Array]]
    length: int = 0
    hyps: int = 1

    def select(self, rows: Array, hyps: int) -> Cache:
        """Keep ``rows`` (row j then belongs to sentence j // ``hyps``): a beam's reordering within its sentences,
        or greedy search dropping finished sentences (their cross-attention keys and values go too)."""
        sentences = rows[::hyps] // self.hyps
        same = len(sentences) == self.mask.shape[0] and bool((sentences == np.arange(len(sentences))).all())
        cross = self.cross if same else [(k[sentences], v[sentences]) for k, v in self.cross]
        mask = self.mask if same else self.mask[sentences]
        selfs = [(k[rows], v[rows]) for k, v in self.selfs]
        return Cache(cross, mask, selfs, self.length, hyps)

    def extend(self, layer: int, k: Array, v: Array) -> tuple[Array, Array]:
        """Write this step's keys and values [N, H, dh] at position ``length``; the filled [N, H, length + 1, dh]."""
        old_k, old_v = self.selfs[layer]
        at = self.length
        if old_k.shape[2] <= at:  # double the capacity
            grown = [np.empty((k.shape[0], k.shape[1], max(8, 2 * at), k.shape[2]), dtype=np.float32) for _ in "kv"]
            grown[0][:, :, :at], grown[1][:, :, :at] = old_k[:, :, :at], old_v[:, :, :at]
            old_k, old_v = grown
            self.selfs[layer] = (old_k, old_v)
        old_k[:, :, at], old_v[:, :, at] = k, v
        return old_k[:, :, :at + 1], old_v[:, :, :at + 1]
