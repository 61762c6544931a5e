"""The Transformer's layers, written out so that every attention can return its per-head weights and every value
worth reading passes a named probe point (``engine.models.probes``).

Each layer is built knowing its probe names (``enc.0``, ``dec.3``) and takes this thread's ``Plan`` (None while no
capture or edit is open) in its forward pass; ``tap`` is all an unused probe costs. An attention block computes its
weights explicitly when the network's caller asks for them (``need_weights``) or a plan reads or edits them, and
takes the fused kernel otherwise. The caches an incremental decode keeps live here too. Names: B batch, H heads, T
length, S source length, D model width, dh = D / H.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnviz.engine.config import ModelConfig
from attnviz.engine.models.cache import grouped, grouping, grow_in_place, owners, select_rows, ungrouped_weights
from attnviz.engine.models.probes import BlockNames, LayerNames, Plan, tap


def widened(x: Tensor) -> Tensor:
    """``x`` in float32 when it is in half precision; float32 and float64 (the exactness tests) stay as they are."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


class MultiHeadAttention(nn.Module):
    """One attention block's projections; its probe points are ``names`` (``q``, ``k``, ``v``, ``weights``,
    ``heads``, ``out``; ``resid`` is the layer's, after the residual connection)."""

    def __init__(self, d_model: int, heads: int, dropout: float, names: BlockNames):
        super().__init__()
        self.heads, self.dropout, self.names = heads, dropout, names
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        return x.view(b, t, self.heads, d // self.heads).transpose(1, 2)  # [B, T, D] -> [B, H, T, dh]

    def keys_values(self, x: Tensor, plan: Plan | None = None) -> tuple[Tensor, Tensor]:
        return tap(plan, self.names.k, self.split(self.k_proj(x))), tap(plan, self.names.v, self.split(self.v_proj(x)))

    def forward(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool,
                plan: Plan | None = None) -> tuple[Tensor, Tensor | None]:
        """Queries from ``x`` [B, T, D] against keys and values [B, H, Tk, dh]; ``mask`` is bool, True where a key may
        be seen. The output [B, T, D] and, when computed, the weights [B, H, T, Tk] (before dropout)."""
        names, scales = self.names, None
        q = tap(plan, names.q, self.split(self.q_proj(x)))
        if plan is not None and plan.wants(names.weights):
            scales = plan.only_head_scales(names.weights)
            need_weights = need_weights or scales is None
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # [B, H, Tq, Tk]
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = tap(plan, names.weights, widened(scores).softmax(dim=-1))  # float32 at half precision
            heads = (F.dropout(weights, p) if p > 0 else weights).to(v.dtype) @ v  # [B, H, Tq, dh]
        else:
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
            if scales is not None:  # head scales commute with the product by the values
                heads = heads * scales.to(heads.dtype)[:, None, None]
        heads = tap(plan, names.heads, heads)
        b, _, t, _ = heads.shape
        return tap(plan, names.out, self.out_proj(heads.transpose(1, 2).reshape(b, t, -1))), weights  # -> [B, T, D]


ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU, "swish": nn.SiLU,
                                                   "gelu_new": lambda: nn.GELU(approximate="tanh")}


class FeedForward(nn.Sequential):
    def __init__(self, d_model: int, ff_dim: int, dropout: float, activation: str = "relu"):
        super().__init__(nn.Linear(d_model, ff_dim), ACTIVATIONS[activation](), nn.Dropout(dropout),
                         nn.Linear(ff_dim, d_model))

    def forward(self, x: Tensor) -> Tensor:
        """The layers in order, skipping the dropout outside training (a decode step pays for every module call)."""
        h = self[1](self[0](x))
        return self[3](self[2](h) if self.training else h)


class Residual(nn.Module):
    """One sublayer's residual connection and LayerNorm, post-LN ``LN(x + f(x))`` or pre-LN ``x + f(LN(x))``; the
    result passes the probe point ``name``."""

    def __init__(self, d_model: int, dropout: float, eps: float, pre_norm: bool, name: str):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.drop = nn.Dropout(dropout)
        self.pre_norm, self.name = pre_norm, name

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], tuple[Tensor, Tensor | None]],
                plan: Plan | None = None) -> tuple[Tensor, Tensor | None]:
        out, weights = sublayer(self.norm(x) if self.pre_norm else x)
        x = x + (self.drop(out) if self.training else out)
        return tap(plan, self.name, x if self.pre_norm else self.norm(x)), weights


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, prefix: str):
        super().__init__()
        pre, attn = cfg.norm == "pre", BlockNames.of(f"{prefix}.attn")
        self.names = LayerNames.of(prefix)
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.dropout, attn)
        self.ff = FeedForward(cfg.d_model, cfg.ff_dim, cfg.dropout, cfg.activation)
        self.res_attn = Residual(cfg.d_model, cfg.dropout, cfg.ln_eps, pre, attn.resid)
        self.res_ff = Residual(cfg.d_model, cfg.dropout, cfg.ln_eps, pre, self.names.out)

    def forward(self, x: Tensor, mask: Tensor, need_weights: bool, plan: Plan | None = None
                ) -> tuple[Tensor, Tensor | None]:
        def attend(h: Tensor) -> tuple[Tensor, Tensor | None]:
            return self.self_attn(h, *self.self_attn.keys_values(h, plan), mask, need_weights, plan)

        x, weights = self.res_attn(tap(plan, self.names.input, x), attend, plan)
        x, _ = self.res_ff(x, lambda h: (tap(plan, self.names.ff, self.ff(h)), None), plan)
        return x, weights


@dataclass
class LayerCache:
    """Keys and values one decoder layer has seen: self-attention grows by a step in its buffer, cross-attention is
    fixed, one per sentence (``engine.models.cache``)."""

    cross_k: Tensor | None  # [B, H, S, dh]; None in a decoder-only model
    cross_v: Tensor | None
    self_k: Tensor | None = None  # [N, H, capacity, dh], positions [:length] filled; N = B * hyps
    self_v: Tensor | None = None
    limit: int | None = None  # positions the buffers ever need (the model's target length limit)

    def extend(self, k: Tensor, v: Tensor, at: int) -> tuple[Tensor, Tensor]:
        """Write this step's keys and values [N, H, T, dh] at position ``at``; the filled [N, H, at + T, dh]."""
        self.self_k, k = grow_in_place(self.self_k, k, at, self.limit)
        self.self_v, v = grow_in_place(self.self_v, v, at, self.limit)
        return k, v


@dataclass
class DecoderCache:
    memory_mask: Tensor  # [B, 1, 1, S], True at real source tokens
    layers: list[LayerCache]
    length: int = 0  # target positions fed so far
    hyps: int = 1  # rows per sentence: row r decodes sentence r // hyps

    def select(self, index: Tensor) -> DecoderCache:
        """Reorder or subset the rows (beam search); a sentence's cross-attention keys and values stay shared by
        its rows unless the selection mixes sentences up (then they are gathered per row)."""
        group = grouping(index, self.memory_mask.size(0), self.hyps)
        sentence = owners(index, self.hyps)
        pick = lambda t: t if t is None or group else t.index_select(0, sentence)  # noqa: E731
        layers = [LayerCache(pick(c.cross_k), pick(c.cross_v), select_rows(c.self_k, index, self.length),
                             select_rows(c.self_v, index, self.length), c.limit) for c in self.layers]
        return DecoderCache(pick(self.memory_mask), layers, self.length, group or 1)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, has_source: bool, prefix: str):
        super().__init__()
        pre = cfg.norm == "pre"
        self_names, cross_names = BlockNames.of(f"{prefix}.self"), BlockNames.of(f"{prefix}.cross")
        self.names = LayerNames.of(prefix)
        # Creation order fixes the parameter order, which a training-state file's optimizer slots follow.
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.dropout, self_names)
        if has_source:
            self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.dropout, cross_names)
        self.ff = FeedForward(cfg.d_model, cfg.ff_dim, cfg.dropout, cfg.activation)
        self.res_self = Residual(cfg.d_model, cfg.dropout, cfg.ln_eps, pre, self_names.resid)
        if has_source:
            self.res_cross = Residual(cfg.d_model, cfg.dropout, cfg.ln_eps, pre, cross_names.resid)
        self.res_ff = Residual(cfg.d_model, cfg.dropout, cfg.ln_eps, pre, self.names.out)

    def forward(self, x: Tensor, self_mask: Tensor | None, cache: LayerCache, memory_mask: Tensor, need_weights: bool,
                keep: bool, at: int = 0, hyps: int = 1, plan: Plan | None = None
                ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """``keep``: write this call's keys/values into the cache at position ``at`` (incremental decoding) instead
        of using them once; ``hyps``: rows of ``x`` per sentence of the cache's cross-attention keys/values."""

        def attend_self(h: Tensor) -> tuple[Tensor, Tensor | None]:
            k, v = self.self_attn.keys_values(h, plan)
            if keep:
                k, v = cache.extend(k, v, at)  # [N, H, t, dh], views of the buffers
            return self.self_attn(h, k, v, self_mask, need_weights, plan)

        def attend_source(h: Tensor) -> tuple[Tensor, Tensor | None]:
            assert cache.cross_k is not None and cache.cross_v is not None
            if hyps == 1:
                return self.cross_attn(h, cache.cross_k, cache.cross_v, memory_mask, need_weights, plan)
            out, weights = self.cross_attn(grouped(h, hyps), cache.cross_k, cache.cross_v, memory_mask, need_weights,
                                           plan)
            t = h.size(1)  # a sentence's hypotheses are queries side by side against its one set of keys
            return out.view_as(h), None if weights is None else ungrouped_weights(weights, hyps, t)

        x, self_w = self.res_self(tap(plan, self.names.input, x), attend_self, plan)
        cross_w = None
        if cache.cross_k is not None:
            x, cross_w = self.res_cross(x, attend_source, plan)
        x, _ = self.res_ff(x, lambda h: (tap(plan, self.names.ff, self.ff(h)), None), plan)
        return x, self_w, cross_w


class Embedding(nn.Module):
    """Token embedding (scaled by sqrt(D) unless the config says not; the scaled vectors pass the probe point
    ``name``) plus a learned or sinusoidal position, a LayerNorm when the config says so (``embed_norm``), then
    dropout."""

    table: Tensor  # [max_positions, D] sinusoidal positions: a buffer, computed, never stored

    def __init__(self, vocab_size: int, cfg: ModelConfig, name: str):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, cfg.d_model)
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0
        self.drop = nn.Dropout(cfg.dropout)
        self.max_positions, self.layout, self.name = cfg.max_positions, cfg.positions, name
        self.positions: nn.Embedding | None = None  # a sinusoidal table is a buffer instead
        if cfg.positions == "learned":
            self.positions = nn.Embedding(cfg.max_positions, cfg.d_model)
        else:
            self.register_buffer("table", self._sinusoids(cfg.d_model), persistent=False)
        self.norm = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps) if cfg.embed_norm else None

    def compute_buffers(self) -> None:
        """The sinusoid table, at the token weights' dtype, for a network built on the meta device and then given
        its weights (``engine.checkpoints.assign``)."""
        if self.positions is None:
            weight = self.tokens.weight
            self.table = self._sinusoids(weight.size(1)).to(weight.dtype)

    def _sinusoids(self, d: int) -> Tensor:
        """[max_positions, D]: the config's sinusoidal layout (fairseq's, Marian's halves, or interleaved)."""
        if self.layout == "sinusoidal-fairseq":
            return fairseq_sinusoid_table(self.max_positions, d)
        return sinusoid_table(self.max_positions, d, halves=self.layout == "sinusoidal-halves")

    def forward(self, ids: Tensor, offset: int = 0, plan: Plan | None = None) -> Tensor:
        if offset + ids.size(1) > self.max_positions:
            raise ValueError(f"sequence length {offset + ids.size(1)} exceeds the model's "
                             f"{self.max_positions} positions")
        pos = torch.arange(offset, offset + ids.size(1), device=ids.device)
        pos_emb = self.positions(pos) if self.positions is not None else self.table[pos]
        x = tap(plan, self.name, self.tokens(ids) * self.scale) + pos_emb  # [B, T, D]
        x = x if self.norm is None else self.norm(x)
        return self.drop(x) if self.training else x


def sinusoid_table(n: int, d: int, halves: bool = False) -> Tensor:
    """[n, d] positions: sin and cos of the same frequencies interleaved, or (``halves``) every sin first and every
    cos after (MarianMT), computed in float64 as Marian's own table is."""
    if torch.empty(0).device.type == "meta":  # a shapes-only build (checking a file): the values are not needed, and
        return torch.empty(n, d)  # computing them on the meta device imports torch's compiler stack (seconds)
    pos = torch.arange(n, dtype=torch.float64).unsqueeze(1)
    freq = torch.pow(10000.0, -torch.arange(0, d, 2, dtype=torch.float64) / d)  # [ceil(d / 2)]
    angles = pos * freq  # [n, ceil(d / 2)]
    table = torch.zeros(n, d, dtype=torch.float64)
    if halves:
        table[:, : angles.size(1)] = torch.sin(angles)
        table[:, angles.size(1):] = torch.cos(angles[:, : d // 2])
    else:
        table[:, 0::2] = torch.sin(angles)
        table[:, 1::2] = torch.cos(angles[:, : d // 2])
    return table.float()


def fairseq_sinusoid_table(n: int, d: int, first: int = 2) -> Tensor:
    """[n, d] positions as fairseq (M2M100, NLLB-200) computes them: sin of D/2 frequencies with the step
    log(10000) / (D/2 - 1) then their cos, a zero column for an odd D, rows for the position numbers ``first``
    (fairseq's pad id + 1) to ``first + n - 1``; computed in float32 as fairseq and transformers compute it, so the
    values agree to the last bit."""
    if torch.empty(0).device.type == "meta":  # a shapes-only build (see sinusoid_table)
        return torch.empty(n, d)
    half = d // 2
    freq = torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(10000) / max(half - 1, 1)))
    angles = torch.arange(first, first + n, dtype=torch.int64).float().unsqueeze(1) * freq.unsqueeze(0)  # [n, D/2]
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)  # [n, 2 * (D/2)]
    return torch.cat([table, torch.zeros(n, d - 2 * half)], dim=1)
