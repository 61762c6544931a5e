"""The Transformer, written out so that every attention returns its per-head weights.

One network serves the registered Transformer kinds: the encoder-decoder translation model and, built with
``has_source`` False (the kind says so), the decoder-only language model (reference D), whose ``encode`` returns
an empty source so search drives both the same way. It implements ``models.protocol.IncrementalModel``:
``encode`` / ``decode`` / ``project`` for training and full recomputation, and the incremental protocol search
uses: ``start`` builds a ``DecoderCache`` (cross-attention keys and values computed once per sentence, shared by
its beam hypotheses) and ``step`` feeds one token per row, writing its self-attention keys and values in place.
Names: B batch, H heads, L layers, S source length, T target length, D model width.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import ConfigError
from attnviz.engine.models.cache import grouped, grouping, grow_in_place, owners, select_rows, ungrouped_weights
from attnviz.engine.models.head_gate import HeadGated
from attnviz.engine.models.protocol import Decoded, Encoded, IncrementalModel
from attnviz.engine.text.vocab import PAD_ID


def widened(x: Tensor) -> Tensor:
    """``x`` in float32 when it is in half precision; float32 and float64 (the exactness tests) stay as they are."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float, need_weights: bool):
    """Scaled dot-product attention over [B, H, T, dh] tensors; ``mask`` is bool, True where a key may be seen.

    With ``need_weights`` the softmax is explicit and its weights [B, H, Tq, Tk] (before dropout) are returned;
    otherwise the fused kernel runs and the weights are None.
    """
    if not need_weights:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p), None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # [B, H, Tq, Tk]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = widened(scores).softmax(dim=-1)  # float32 at half precision: the views read these maps
    return (F.dropout(weights, dropout_p) if dropout_p > 0 else weights).to(v.dtype) @ v, weights


class MultiHeadAttention(HeadGated, nn.Module):
    """``head_gate``: [H] multipliers while heads are switched off in this thread (``engine.search.head_mask``)."""

    def __init__(self, d_model: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        return x.view(b, t, self.heads, d // self.heads).transpose(1, 2)  # [B, T, D] -> [B, H, T, dh]

    def keys_values(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.split(self.k_proj(x)), self.split(self.v_proj(x))

    def forward(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool):
        q = self.split(self.q_proj(x))
        out, weights = attention(q, k, v, mask, self.dropout if self.training else 0.0, need_weights)
        gate = self.head_gate
        if gate is not None:  # an off head's weights are zero, so its output [B, H, T, dh] is too
            gate = gate[:, None, None]
            out = out * gate
            weights = None if weights is None else weights * (gate != 0)
        b, _, t, _ = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, -1)), weights  # [B, H, T, dh] -> [B, T, D]


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
    """One sublayer's residual connection and LayerNorm, post-LN ``LN(x + f(x))`` or pre-LN ``x + f(LN(x))``."""

    def __init__(self, d_model: int, dropout: float, eps: float, pre_norm: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.drop = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: Tensor, sublayer) -> tuple[Tensor, Tensor | None]:
        out, weights = sublayer(self.norm(x) if self.pre_norm else x)
        x = x + (self.drop(out) if self.training else out)
        return (x if self.pre_norm else self.norm(x)), weights


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.dropout)
        self.ff = FeedForward(cfg.d_model, cfg.ff_dim, cfg.dropout, cfg.activation)
        self.res_attn = Residual(cfg.d_model, cfg.dropout, cfg.ln_eps, pre)
        self.res_ff = Residual(cfg.d_model, cfg.dropout, cfg.ln_eps, pre)

    def forward(self, x: Tensor, mask: Tensor, need_weights: bool):
        def attend(h):
            return self.self_attn(h, *self.self_attn.keys_values(h), mask, need_weights)

        x, weights = self.res_attn(x, attend)
        x, _ = self.res_ff(x, lambda h: (self.ff(h), None))
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
    def __init__(self, cfg: ModelConfig, has_source: bool):
        super().__init__()
        pre = cfg.norm == "pre"
        # Creation order fixes the parameter order, which a training-state file's optimizer slots follow.
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.dropout)
        if has_source:
            self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.dropout)
        self.ff = FeedForward(cfg.d_model, cfg.ff_dim, cfg.dropout, cfg.activation)
        self.res_self = Residual(cfg.d_model, cfg.dropout, cfg.ln_eps, pre)
        if has_source:
            self.res_cross = Residual(cfg.d_model, cfg.dropout, cfg.ln_eps, pre)
        self.res_ff = Residual(cfg.d_model, cfg.dropout, cfg.ln_eps, pre)

    def forward(self, x: Tensor, self_mask: Tensor | None, cache: LayerCache, memory_mask: Tensor, need_weights: bool,
                keep: bool, at: int = 0, hyps: int = 1):
        """``keep``: write this call's keys/values into the cache at position ``at`` (incremental decoding) instead
        of using them once; ``hyps``: rows of ``x`` per sentence of the cache's cross-attention keys/values."""

        def attend_self(h):
            k, v = self.self_attn.keys_values(h)
            if keep:
                k, v = cache.extend(k, v, at)  # [N, H, t, dh], views of the buffers
            return self.self_attn(h, k, v, self_mask, need_weights)

        def attend_source(h):
            if hyps == 1:
                return self.cross_attn(h, cache.cross_k, cache.cross_v, memory_mask, need_weights)
            out, weights = self.cross_attn(grouped(h, hyps), cache.cross_k, cache.cross_v, memory_mask, need_weights)
            t = h.size(1)  # a sentence's hypotheses are queries side by side against its one set of keys
            return out.view_as(h), None if weights is None else ungrouped_weights(weights, hyps, t)

        x, self_w = self.res_self(x, attend_self)
        cross_w = None
        if cache.cross_k is not None:
            x, cross_w = self.res_cross(x, attend_source)
        x, _ = self.res_ff(x, lambda h: (self.ff(h), None))
        return x, self_w, cross_w


class Embedding(nn.Module):
    """Token embedding (scaled by sqrt(D) unless the config says not) plus a learned or sinusoidal position, a
    LayerNorm when the config says so (``embed_norm``), then dropout."""

    table: Tensor  # [max_positions, D] sinusoidal positions: a buffer, computed, never stored

    def __init__(self, vocab_size: int, cfg: ModelConfig):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, cfg.d_model)
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0
        self.drop = nn.Dropout(cfg.dropout)
        self.max_positions, self.layout = cfg.max_positions, cfg.positions
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

    def forward(self, ids: Tensor, offset: int = 0) -> Tensor:
        if offset + ids.size(1) > self.max_positions:
            raise ValueError(f"sequence length {offset + ids.size(1)} exceeds the model's "
                             f"{self.max_positions} positions")
        pos = torch.arange(offset, offset + ids.size(1), device=ids.device)
        pos_emb = self.positions(pos) if self.positions is not None else self.table[pos]
        x = self.tokens(ids) * self.scale + pos_emb  # [B, T, D]
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


class Transformer(IncrementalModel):
    """``has_source`` False: a decoder-only language model (no encoder, no cross-attention)."""

    def __init__(self, cfg: ModelConfig, has_source: bool = True):
        super().__init__()
        self.cfg, self.has_source = cfg, has_source
        if has_source:
            self.src_embed = Embedding(cfg.src_vocab_size, cfg)
        self.tgt_embed = Embedding(cfg.tgt_vocab_size, cfg)
        if has_source:
            self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg, has_source) for _ in range(cfg.dec_layers))
        pre = cfg.norm == "pre"
        self.enc_norm = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps) if pre and has_source else nn.Identity()
        self.dec_norm = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps) if pre else nn.Identity()
        self.out_proj = nn.Linear(cfg.d_model, cfg.tgt_vocab_size)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        if cfg.embed_init == "normal":  # tokens as strong as the sinusoidal positions they are added to
            for embed in (getattr(self, "src_embed", None), self.tgt_embed):
                if embed is not None:
                    nn.init.normal_(embed.tokens.weight, 0.0, cfg.d_model ** -0.5)
        if cfg.share_embeddings and has_source:  # first, so a tied output follows the shared table
            self.tgt_embed.tokens.weight = self.src_embed.tokens.weight
        if cfg.tie_output:
            self.out_proj.weight = self.tgt_embed.tokens.weight

    def encode(self, src: Tensor, need_weights: bool = False) -> Encoded:
        """``src`` [B, S] ids (pad = PAD_ID) -> memory [B, S, D] and, if asked, encoder self-attention.

        A decoder-only model reads no source: its memory is empty ([B, 0, D]) whatever ``src`` holds.
        """
        mask = (src != PAD_ID)[:, None, None, :]  # [B, 1, 1, S]
        if not self.has_source:
            return Encoded(src.new_zeros(src.size(0), 0, self.cfg.d_model, dtype=self.out_proj.weight.dtype),
                           mask[..., :0])
        x, weights = self.src_embed(src), []
        for layer in self.encoder:
            x, w = layer(x, mask, need_weights)
            weights.append(w)
        return Encoded(self.enc_norm(x), mask, weights if need_weights else [])

    def decoder_layers(self) -> list[DecoderLayer]:
        return cast("list[DecoderLayer]", list(self.decoder))  # nn.ModuleList's items are typed as any Module

    def encoder_layers(self) -> list[EncoderLayer]:
        return cast("list[EncoderLayer]", list(self.encoder)) if self.has_source else []

    def start(self, enc: Encoded) -> DecoderCache:
        if not self.has_source:
            return DecoderCache(enc.mask, [LayerCache(None, None, limit=self.max_target_len) for _ in self.decoder])
        layers = [LayerCache(*layer.cross_attn.keys_values(enc.memory), limit=self.max_target_len)
                  for layer in self.decoder_layers()]
        return DecoderCache(enc.mask, layers)

    def decode(self, tgt: Tensor, enc: Encoded | None, need_weights: bool = False,
               cache: DecoderCache | None = None) -> Decoded:
        """Decode ``tgt`` [B, T]: the whole prefix of ``enc`` (no cache), or the tokens after ``cache.length``."""
        offset = cache.length if cache is not None else 0
        t_new = tgt.size(1)
        keep = cache is not None
        if cache is None:
            if enc is None:
                raise ValueError("decoding without a cache needs the encoded source")
            cache = self.start(enc)
        causal = None
        if t_new > 1:  # a single new query may see every earlier key
            causal = torch.ones(t_new, offset + t_new, dtype=torch.bool, device=tgt.device).tril(offset)  # [T, t]
        x, self_ws, cross_ws = self.tgt_embed(tgt, offset), [], []
        for layer, layer_cache in zip(self.decoder, cache.layers):
            x, sw, cw = layer(x, causal, layer_cache, cache.memory_mask, need_weights, keep, offset, cache.hyps)
            self_ws.append(sw)
            if cw is not None:
                cross_ws.append(cw)
        if keep:
            cache.length += t_new
        return Decoded(self.dec_norm(x), self_ws if need_weights else [], cross_ws if need_weights else [])

    def project(self, hidden: Tensor) -> Tensor:
        return widened(self.out_proj(hidden))  # [B, T, D] -> [B, T, V]; search scores in float32 at half precision

    def project_rows(self, hidden: Tensor) -> Tensor:
        """Logits [N, V] of a few rows [N, D] as the weight-major product W @ h^T (float32 on the CPU): MKL's
        h @ W^T with a few rows repacks the whole V x D weight at every call, so 5 rows of a 58k vocabulary took
        2x one row's time; W @ h^T takes one row's. One row is the same matrix-vector product either way; with
        several rows the sums run in another order, which may change a logit's last bits (tests/engine/
        test_search_cache.py)."""
        proj = self.out_proj
        if type(proj) is not nn.Linear or proj.weight.dtype != torch.float32 or hidden.device.type != "cpu":
            return self.project(hidden)
        if proj.bias is None:
            return (proj.weight @ hidden.t()).t().contiguous()
        return torch.addmm(proj.bias[:, None], proj.weight, hidden.t()).t().contiguous()

    def attention_modules(self) -> dict[str, list[MultiHeadAttention]]:
        """Each attention kind's modules, one per layer (where ``engine.search.head_mask`` switches heads off)."""
        modules = {"decoder": [layer.self_attn for layer in self.decoder_layers()]}
        if self.has_source:
            modules |= {"encoder": [layer.self_attn for layer in self.encoder_layers()],
                        "cross": [layer.cross_attn for layer in self.decoder_layers()]}
        return modules

    def forward(self, src: Tensor, tgt_in: Tensor, teacher_forcing: float = 1.0) -> Tensor:
        """Teacher-forced logits [B, T, V] for training (a Transformer always sees the gold prefix)."""
        if teacher_forcing < 1.0:
            raise ConfigError("teacher_forcing below 1 needs a recurrent model; a Transformer always sees the gold "
                              "prefix")
        return self.project(self.decode(tgt_in, self.encode(src)).hidden)
