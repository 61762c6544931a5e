"""The numpy MarianMT network's passes (``engine.plain.network`` holds its parts): ``encode`` a padded batch of
source ids, ``start`` a decoding cache, and ``step`` one token a row to the next logits, in Marian's column order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from attnviz.engine.config import ModelConfig
from attnviz.engine.plain.network import (
    ACTIVATIONS,
    Array,
    Block,
    Cache,
    Layer,
    build_layers,
    halves_table,
    layer_norm,
    softmax,
    split_heads,
)
from attnviz.engine.plain.panels import Panels
from attnviz.engine.text.vocab import PAD_ID


class PlainMarian:
    """The network of a MarianMT folder's ``cfg`` over its ``weights`` (Marian's names, checked against the
    folder's plan), reading attnviz ids through ``src_order``/``tgt_order`` (the Marian row of each)."""

    def __init__(self, cfg: ModelConfig, weights: Mapping[str, Array], src_order: Sequence[int],
                 tgt_order: Sequence[int]):
        self.cfg = cfg
        self.max_source_len = self.max_target_len = cfg.max_positions
        shared = [weights[n] for n in ("model.shared.weight", "model.encoder.embed_tokens.weight",
                                        "model.decoder.embed_tokens.weight") if n in weights]
        self.src_embed = shared[0] if cfg.share_embeddings else weights["model.encoder.embed_tokens.weight"]
        self.tgt_embed = shared[0] if cfg.share_embeddings else weights["model.decoder.embed_tokens.weight"]
        out = self.tgt_embed if cfg.tie_output else weights["lm_head.weight"]
        bias = weights.get("final_logits_bias")
        self.out = Panels(out, np.zeros(out.shape[0], np.float32) if bias is None else bias[0])
        # a table the panels rearranged is read through them (the tied embedding)
        self.src_lookup = self.out.rows if self.src_embed is out else self.src_embed.__getitem__
        self.tgt_lookup = self.out.rows if self.tgt_embed is out else self.tgt_embed.__getitem__
        self.src_rows = np.asarray(src_order, dtype=np.int64)
        self.tgt_rows = np.asarray(tgt_order, dtype=np.int64)
        self.scale = np.float32(math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0)
        self.table = halves_table(cfg.max_positions, cfg.d_model)
        self.encoder = build_layers(weights, "encoder", cfg.enc_layers)
        self.decoder = build_layers(weights, "decoder", cfg.dec_layers)
        self.act = ACTIVATIONS[cfg.activation]
        self.heads, self.eps = cfg.heads, cfg.ln_eps
        self.inv_sqrt = np.float32(1.0 / math.sqrt(cfg.d_model // cfg.heads))

    @property
    def vocab_columns(self) -> int:
        """The logits' width: Marian's target vocabulary."""
        return self.out.vocab

    def _ff(self, layer: Layer, x: Array) -> Array:
        fc1, fc2 = layer.ff
        return layer_norm(x + fc2(self.act(fc1(x))), *layer.ff_norm, self.eps)

    def _self_block(self, block: Block, x: Array, mask: Array) -> Array:
        """Encoder self-attention of ``x`` [B, S, D] under the additive key ``mask`` [B, 1, 1, S], residual, LN."""
        b, s, d = x.shape
        q, k, v = np.split(split_heads(block.joined(x), 3 * self.heads), 3, axis=1)
        scores = softmax(q @ np.swapaxes(k, -1, -2) * self.inv_sqrt + mask)  # [B, H, S, S]
        heads = np.swapaxes(scores @ v, 1, 2).reshape(b, s, d)
        return layer_norm(x + block.out(heads), *block.norm, self.eps)

    def encode(self, src: Array) -> tuple[Array, Array]:
        """``src`` [B, S] attnviz ids padded with ``PAD_ID`` -> memory [B, S, D] and the additive mask [B, 1, 1, S]."""
        if src.shape[1] > self.max_source_len:
            raise ValueError(f"sequence length {src.shape[1]} exceeds the model's {self.max_source_len} positions")
        mask = np.where(src == PAD_ID, np.float32(-np.inf), np.float32(0.0))[:, None, None, :]
        x = self.src_lookup(self.src_rows[src]) * self.scale + self.table[:src.shape[1]]
        for layer in self.encoder:
            x = self._ff(layer, self._self_block(layer.attn, x, mask))
        return x, mask

    def start(self, memory: Array, mask: Array) -> Cache:
        cross = []
        for layer in self.decoder:
            assert layer.cross is not None
            k, v = np.split(split_heads(layer.cross.joined(memory), 2 * self.heads), 2, axis=1)
            cross.append((np.ascontiguousarray(k), np.ascontiguousarray(v)))
        empty = np.empty((memory.shape[0], self.heads, 0, self.cfg.d_model // self.heads), np.float32)
        return Cache(cross, mask, [(empty, empty) for _ in self.decoder])

    def _decoder_self(self, block: Block, x: Array, cache: Cache, i: int) -> Array:
        n, d = x.shape
        qkv = block.joined(x).reshape(n, 3, self.heads, d // self.heads)
        keys, values = cache.extend(i, qkv[:, 1], qkv[:, 2])  # [N, H, t, dh]
        scores = softmax(np.einsum("nhd,nhtd->nht", qkv[:, 0], keys) * self.inv_sqrt)
        heads = np.einsum("nht,nhtd->nhd", scores, values).reshape(n, d)
        return layer_norm(x + block.out(heads), *block.norm, self.eps)

    def _decoder_cross(self, block: Block, x: Array, cache: Cache, i: int) -> Array:
        """A sentence's ``hyps`` rows query its one set of keys side by side: [B, H, hyps, dh] @ [B, H, dh, S]."""
        assert block.query is not None
        n, d = x.shape
        k, v = cache.cross[i]
        q = block.query(x).reshape(n // cache.hyps, cache.hyps, self.heads, d // self.heads)
        scores = softmax(np.swapaxes(q, 1, 2) @ np.swapaxes(k, -1, -2) * self.inv_sqrt + cache.mask)
        heads = np.swapaxes(scores @ v, 1, 2).reshape(n, d)  # [B, hyps, H, dh] -> [N, D]
        return layer_norm(x + block.out(heads), *block.norm, self.eps)

    def step(self, tokens: Array, cache: Cache) -> Array:
        """One token a row (attnviz ids [N]) -> logits [N, V] in Marian's column order; the cache grows a step."""
        if cache.length >= self.max_target_len:
            raise ValueError(f"sequence length {cache.length + 1} exceeds the model's {self.max_target_len} positions")
        x = self.tgt_lookup(self.tgt_rows[tokens]) * self.scale + self.table[cache.length]
        for i, layer in enumerate(self.decoder):
            assert layer.cross is not None
            x = self._decoder_self(layer.attn, x, cache, i)
            x = self._ff(layer, self._decoder_cross(layer.cross, x, cache, i))
        cache.length += 1
        return self.out(x)
