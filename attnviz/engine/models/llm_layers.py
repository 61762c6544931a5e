"""The layers of a decoder-only LLM (``engine.models.causal_lm``): RMSNorm, grouped-query attention with RoPE, the
gated feed-forward, and the layer that joins them the Llama way (two norms before the blocks); the Gemma way (four:
before and after each block) overrides what differs in ``gemma_layers``. Module and parameter names are the Hugging
Face folders' own (``q_proj``, ``input_layernorm``, ``mlp.gate_proj``...), so a folder's weights load under their
stored names without a copy. Every value worth reading passes a probe point (``engine.models.probes``). Names: B
batch, H query heads, G key/value heads, T new positions, K keys, D width, dh head width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnviz.engine.config import ModelConfig
from attnviz.engine.models.layers import ACTIVATIONS, LayerCache, widened
from attnviz.engine.models.linear import Linear
from attnviz.engine.models.llm_arch import LLMArch
from attnviz.engine.models.probes import BlockNames, LayerNames, Plan, tap
from attnviz.engine.models.protocol import AttentionBlock
from attnviz.engine.models.rope import rotate


class RMSNorm(nn.Module):
    """x / rms(x), in float32 (float64 stays float64: the exactness tests), cast back, then times ``weight`` (the
    Llama way; ``gemma_layers.GemmaRMSNorm`` scales by ``1 + weight`` before the cast)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(self.initial_weight(dim))
        self.eps = eps

    @staticmethod
    def initial_weight(dim: int) -> Tensor:
        return torch.ones(dim)

    def normalised(self, x: Tensor) -> Tensor:
        """x / rms(x) at float32 (float64 kept)."""
        h = x.float() if x.dtype != torch.float64 else x
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x: Tensor) -> Tensor:
        return self.weight * self.normalised(x).to(x.dtype)

    def gain(self) -> Tensor:
        """The factor [D] x / rms(x) is multiplied by."""
        return self.weight


class GroupedAttention(nn.Module):
    """Self-attention with ``kv_heads`` key/value heads, each read by ``heads // kv_heads`` query heads (GQA), RoPE on
    queries and keys (the ``q`` and ``k`` probe points hold them rotated), optional q/k RMSNorm and score softcap."""

    def __init__(self, cfg: ModelConfig, arch: LLMArch, norm: type[RMSNorm] = RMSNorm):
        super().__init__()
        d, dh, self.heads, self.kv_heads = cfg.d_model, arch.head_dim, cfg.heads, arch.kv_heads
        self.scale, self.softcap = arch.scale, arch.attn_softcap
        self.q_proj = Linear(d, self.heads * dh, bias=arch.qkv_bias)
        self.k_proj = Linear(d, self.kv_heads * dh, bias=arch.qkv_bias)
        self.v_proj = Linear(d, self.kv_heads * dh, bias=arch.qkv_bias)
        self.o_proj = Linear(self.heads * dh, d, bias=arch.out_bias)
        self.q_norm = norm(dh, cfg.ln_eps) if arch.qk_norm else None
        self.k_norm = norm(dh, cfg.ln_eps) if arch.qk_norm else None

    def _split(self, x: Tensor, heads: int) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, heads, -1).transpose(1, 2)  # [B, T, heads * dh] -> [B, heads, T, dh]

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], cache: LayerCache, at: int, mask: Tensor | None,
                need_weights: bool, plan: Plan | None, names: BlockNames, rows: slice | None = None
                ) -> tuple[Tensor, Tensor | None]:
        """Queries of ``x`` [B, T, D] against the cache's keys and this call's, written at slot ``at``; ``mask`` [B, 1,
        T, K] True where a key may be seen (None: every one); the values pass the probe points ``names``. Output
        [B, T, D] and, when computed, weights [B, H, T, K] (float32 at half precision). ``rows``: only those
        positions ask (queries, output, a mask of theirs), every position still giving its key and value."""
        asking = x if rows is None else x[:, rows]
        q, k, v = (self._split(self.q_proj(asking), self.heads), self._split(self.k_proj(x), self.kv_heads),
                   self._split(self.v_proj(x), self.kv_heads))
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q_rope = rope if rows is None else (rope[0][..., rows, :], rope[1][..., rows, :])
        q, k = tap(plan, names.q, rotate(q, *q_rope)), tap(plan, names.k, rotate(k, *rope))
        k, v = cache.extend(k, tap(plan, names.v, v), at)  # [B, G, K, dh]
        # an edit may make the values variants of this pass's (value zeroing: [B', G, K, dh]), the weights shared
        variants = v.size(0) != q.size(0)
        scales = None
        if plan is not None and plan.wants(names.weights):
            scales = plan.only_head_scales(names.weights)
            need_weights = need_weights or scales is None
        weights = None
        if need_weights or self.softcap or variants:
            weights = tap(plan, names.weights, self._weighted(q, k, mask))
            heads = self._mix(weights, v)
        else:
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale, enable_gqa=True)
            if scales is not None:  # head scales commute with the product by the values
                heads = heads * scales.to(heads.dtype)[:, None, None]
        heads = tap(plan, names.heads, heads)
        b, _, t, _ = heads.shape
        out = tap(plan, names.out, self.o_proj(heads.transpose(1, 2).reshape(b, t, -1)))
        return out, weights if need_weights else None

    def _grouped(self, x: Tensor) -> Tensor:
        """Query heads [B, H, T, X] as [B, G, H / G * T, X]: each key/value head's queries side by side (a view)."""
        b, h, t, x_ = x.shape
        return x.reshape(b, self.kv_heads, h // self.kv_heads * t, x_)

    def _weighted(self, q: Tensor, k: Tensor, mask: Tensor | None) -> Tensor:
        b, h, t, _ = q.shape
        scores = (self._grouped(q) @ k.transpose(-2, -1)).view(b, h, t, -1) * self.scale  # [B, H, T, K]
        if self.softcap:
            scores = torch.tanh(scores / self.softcap) * self.softcap
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return widened(scores).softmax(dim=-1)

    def _mix(self, weights: Tensor, v: Tensor) -> Tensor:
        """The heads' outputs [B, H, T, dh] (values with more rows than the weights: one output per variant)."""
        _, h, t, _ = weights.shape
        return (self._grouped(weights.to(v.dtype)) @ v).view(-1, h, t, v.size(-1))


class GatedFeedForward(nn.Module):
    """down(act(gate(x)) * up(x)): SwiGLU (``swish``) or GeGLU with the tanh GELU (``gelu_new``)."""

    def __init__(self, cfg: ModelConfig, bias: bool):
        super().__init__()
        self.gate_proj = Linear(cfg.d_model, cfg.ff_dim, bias=bias)
        self.up_proj = Linear(cfg.d_model, cfg.ff_dim, bias=bias)
        self.down_proj = Linear(cfg.ff_dim, cfg.d_model, bias=bias)
        self.act = ACTIVATIONS[cfg.activation]()

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class LLMLayer(nn.Module):
    """One decoder layer the Llama way: ``x + attn(norm(x))`` then ``+ mlp(norm(.))``. Another layer form (Gemma's,
    ``gemma_layers``) overrides what differs: its norm (``norm``), what the residual adds of the attention
    (``post_attention``), the feed-forward sublayer (``feed_forward``) and how mixing analyses see the block
    (``block``). Its probe points are named by the pass, as an encoder-decoder's: reading the prompt,
    ``enc.{l}.in``, ``enc.{l}.attn.*``, ``enc.{l}.ff.out``, ``enc.{l}.out``; the output steps, ``dec.{l}.in``,
    ``dec.{l}.self.*``, ``dec.{l}.ff.out``, ``dec.{l}.out`` (``resid`` after the attention is added, ``ff.out`` what
    the feed-forward adds)."""

    norm: type[RMSNorm] = RMSNorm
    scales_embeddings = False  # the embedding is multiplied by sqrt(D) before the first layer (Gemma)

    def __init__(self, cfg: ModelConfig, arch: LLMArch, layer: int):
        super().__init__()
        self.names = {"prompt": (LayerNames.of(f"enc.{layer}"), BlockNames.of(f"enc.{layer}.attn")),
                      "output": (LayerNames.of(f"dec.{layer}"), BlockNames.of(f"dec.{layer}.self"))}
        self.self_attn = GroupedAttention(cfg, arch, self.norm)
        self.mlp = GatedFeedForward(cfg, arch.mlp_bias)
        self.input_layernorm = self.norm(cfg.d_model, cfg.ln_eps)
        self.post_attention_layernorm = self.norm(cfg.d_model, cfg.ln_eps)  # Llama's: before the feed-forward
        self.sliding = arch.sliding(layer)

    def block(self) -> AttentionBlock:
        """The attention block as mixing analyses decompose it: the pre-attention RMSNorm acts on each key's input,
        and no norm follows the block."""
        attn = self.self_attn
        bias = None if attn.o_proj.bias is None else attn.o_proj.bias.detach()
        return AttentionBlock(attn.o_proj.weight.detach(), bias, attn.heads, attn.kv_heads, None, "none")

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], cache: LayerCache, at: int, mask: Tensor | None,
                need_weights: bool, plan: Plan | None, prompt: bool, rows: slice | None = None
                ) -> tuple[Tensor, Tensor | None]:
        """The layer over ``x`` [B, T, D]; ``rows``: the output of those positions alone (``GroupedAttention``)."""
        names, block = self.names["prompt" if prompt else "output"]
        x = tap(plan, names.input, x)
        out, weights = self.self_attn(self.input_layernorm(x), rope, cache, at, mask, need_weights, plan, block, rows)
        return self.finish(x if rows is None else x[:, rows], out, plan, prompt), weights

    def finish(self, x: Tensor, out: Tensor, plan: Plan | None, prompt: bool) -> Tensor:
        """The rest of the layer after its attention block's output ``out`` (before the residual): the residual sum
        and the feed-forward, through the pass's probe points (``resid``, ``ff.out``, ``out``)."""
        names, block = self.names["prompt" if prompt else "output"]
        x = tap(plan, block.resid, x + self.post_attention(out))
        return tap(plan, names.out, x + tap(plan, names.ff, self.feed_forward(x)))

    def post_attention(self, out: Tensor) -> Tensor:
        """What the residual adds of the attention block's output [..., D]: itself."""
        return out

    def feed_forward(self, x: Tensor) -> Tensor:
        """What the feed-forward sublayer adds to the stream ``x`` [..., D] after the attention block."""
        return self.mlp(self.post_attention_layernorm(x))
