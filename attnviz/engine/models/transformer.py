"""The Transformer network (its layers: ``engine.models.layers``), every attention able to return its per-head
weights and every inside value reachable through its probe points (``engine.models.probes``).

One network serves the registered Transformer kinds: the encoder-decoder translation model and, built with
``has_source`` False (the kind says so), the decoder-only language model (reference D), whose ``encode`` returns
an empty source so search drives both the same way. It implements ``models.protocol.IncrementalModel``:
``encode`` / ``decode`` / ``project`` for training and full recomputation, and the incremental protocol search
uses: ``start`` builds a ``DecoderCache`` (cross-attention keys and values computed once per sentence, shared by
its beam hypotheses) and ``step`` feeds one token per row, writing its self-attention keys and values in place.
Names: B batch, H heads, L layers, S source length, T target length, D model width.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import torch
from torch import Tensor, nn

from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import ConfigError
from attnviz.engine.models.layers import DecoderCache, DecoderLayer, Embedding, EncoderLayer, LayerCache, widened
from attnviz.engine.models.probes import BlockNames, LayerNames, ProbeBoard, ProbeError, tap
from attnviz.engine.models.protocol import AttentionBlock, BlockNorm, Decoded, Encoded, IncrementalModel
from attnviz.engine.models.quantize import rows_of
from attnviz.engine.text.vocab import PAD_ID


class Transformer(IncrementalModel):
    """``has_source`` False: a decoder-only language model (no encoder, no cross-attention)."""

    answers = frozenset({"attention_block", "run_layer", "read_out"})

    def __init__(self, cfg: ModelConfig, has_source: bool = True):
        super().__init__()
        self.cfg, self.has_source = cfg, has_source
        if has_source:
            self.src_embed = Embedding(cfg.src_vocab_size, cfg, "embed.src")
        self.tgt_embed = Embedding(cfg.tgt_vocab_size, cfg, "embed.tgt")
        if has_source:
            self.encoder = nn.ModuleList(EncoderLayer(cfg, f"enc.{i}") for i in range(cfg.enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg, has_source, f"dec.{i}") for i in range(cfg.dec_layers))
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
        self.probes = ProbeBoard(self._probe_names())

    def _probe_names(self) -> list[str]:
        """Every probe point, in the order of the forward pass (``engine.models.probes`` says what each holds)."""
        def layer(prefix: str, blocks: tuple[str, ...]) -> list[str]:
            names = LayerNames.of(prefix)
            return [names.input, *(n for b in blocks for n in BlockNames.of(f"{prefix}.{b}")), names.ff, names.out]

        encoder = [n for i in range(self.cfg.enc_layers) for n in layer(f"enc.{i}", ("attn",))]
        blocks = ("self", "cross") if self.has_source else ("self",)
        decoder = [n for i in range(self.cfg.dec_layers) for n in layer(f"dec.{i}", blocks)]
        source = ["embed.src", *encoder, "enc.final_norm"] if self.has_source else []
        return [*source, "embed.tgt", *decoder, "dec.final_norm", "logits"]

    def encode(self, src: Tensor, need_weights: bool = False) -> Encoded:
        """``src`` [B, S] ids (pad = PAD_ID) -> memory [B, S, D] and, if asked, encoder self-attention.

        A decoder-only model reads no source: its memory is empty ([B, 0, D]) whatever ``src`` holds.
        """
        mask = (src != PAD_ID)[:, None, None, :]  # [B, 1, 1, S]
        if not self.has_source:
            return Encoded(src.new_zeros(src.size(0), 0, self.cfg.d_model, dtype=self.out_proj.weight.dtype),
                           mask[..., :0])
        plan = self.probes.plan()
        x, weights = self.src_embed(src, plan=plan), []
        for layer in self.encoder_layers():
            x, w = layer(x, mask, need_weights, plan)
            weights.append(w)
        return Encoded(tap(plan, "enc.final_norm", self.enc_norm(x)), mask, weights if need_weights else [])

    def decoder_layers(self) -> list[DecoderLayer]:
        return cast("list[DecoderLayer]", list(self.decoder))  # nn.ModuleList's items are typed as any Module

    def encoder_layers(self) -> list[EncoderLayer]:
        return cast("list[EncoderLayer]", list(self.encoder)) if self.has_source else []

    def start(self, enc: Encoded) -> DecoderCache:
        if not self.has_source:
            return DecoderCache(enc.mask, [LayerCache(None, None, limit=self.max_target_len) for _ in self.decoder])
        plan = self.probes.plan()
        layers = [LayerCache(*layer.cross_attn.keys_values(enc.memory, plan), limit=self.max_target_len)
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
        plan = self.probes.plan()
        causal = None
        if t_new > 1:  # a single new query may see every earlier key
            causal = torch.ones(t_new, offset + t_new, dtype=torch.bool, device=tgt.device).tril(offset)  # [T, t]
        x, self_ws, cross_ws = self.tgt_embed(tgt, offset, plan), [], []
        for layer, layer_cache in zip(self.decoder_layers(), cache.layers):
            x, sw, cw = layer(x, causal, layer_cache, cache.memory_mask, need_weights, keep, offset, cache.hyps, plan)
            self_ws.append(sw)
            if cw is not None:
                cross_ws.append(cw)
        if keep:
            cache.length += t_new
        return Decoded(tap(plan, "dec.final_norm", self.dec_norm(x)), self_ws if need_weights else [],
                       cross_ws if need_weights else [])

    def project(self, hidden: Tensor) -> Tensor:
        # [B, T, D] -> [B, T, V]; search scores in float32 at half precision
        return tap(self.probes.plan(), "logits", widened(self.out_proj(hidden)))

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
            logits = (proj.weight @ hidden.t()).t().contiguous()
        else:
            logits = torch.addmm(proj.bias[:, None], proj.weight, hidden.t()).t().contiguous()
        return tap(self.probes.plan(), "logits", logits)

    def restricted(self, ids: Tensor) -> Callable[[Tensor], Tensor] | None:
        """Logits [N, K] of the target ids ``ids`` alone (a vocabulary shortlist), float32 at half precision."""
        rows = rows_of(self.out_proj, ids)
        return None if rows is None else lambda hidden: widened(rows(hidden))

    def read_out(self, hidden: Tensor) -> Tensor:
        """What follows the last decoder layer, applied to any layer's output [B, T, D]: the final LayerNorm of a
        pre-norm network (a post-norm layer ends in its own), then the output projection -> logits [B, T, V]."""
        return self.project(self.dec_norm(hidden))

    @property
    def readout(self) -> str:
        if isinstance(self.dec_norm, nn.Identity):
            return "the output projection (each post-norm layer ends in its own LayerNorm)"
        return "the final LayerNorm, then the output projection"

    def run_layer(self, side: str, layer: int, x: Tensor, mask: Tensor | None = None,
                  memory: Tensor | None = None, rows: slice | None = None) -> Tensor:
        """One ``encoder`` or ``decoder`` layer alone on its input ``x`` [B, T, D] (no cache; a decoder layer sees
        its causal prefix and, when given, ``memory`` [B, S, D] under ``mask`` [B, 1, 1, S]; an encoder layer's
        ``mask`` covers ``x``): its output [B, T, D] (``rows``: of those positions, computed with the rest), the
        layer's probe points firing as in a whole pass."""
        out = self._run_layer(side, layer, x, mask, memory)
        return out if rows is None else out[:, rows]

    def _run_layer(self, side: str, layer: int, x: Tensor, mask: Tensor | None, memory: Tensor | None) -> Tensor:
        plan = self.probes.plan()
        if side == "encoder" and self.has_source:
            return self.encoder_layers()[layer](x, mask, False, plan)[0]
        if side != "decoder":
            raise ProbeError(f"This network has no {side} layers.")
        module, t = self.decoder_layers()[layer], x.size(1)
        if memory is not None and self.has_source:
            cache = LayerCache(*module.cross_attn.keys_values(memory, plan))
        else:
            cache = LayerCache(None, None)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril() if t > 1 else None
        return module(x, causal, cache, mask, False, False, plan=plan)[0]

    def attention_block(self, kind: str, layer: int) -> AttentionBlock:
        """The output projection and residual LayerNorm of an attention block (``encoder``, ``decoder``, ``cross``)."""
        if kind == "encoder" and self.has_source:
            found = self.encoder_layers()[layer]
            attention, residual = found.self_attn, found.res_attn
        elif kind == "decoder":
            attention, residual = self.decoder_layers()[layer].self_attn, self.decoder_layers()[layer].res_self
        elif kind == "cross" and self.has_source:
            attention, residual = self.decoder_layers()[layer].cross_attn, self.decoder_layers()[layer].res_cross
        else:
            raise ProbeError(f"This network has no {kind} attention.")
        proj, norm, heads = attention.out_proj, residual.norm, self.cfg.heads
        if residual.pre_norm:  # the LayerNorm acts on each key's input, inside its term
            return AttentionBlock(proj.weight, proj.bias, heads, heads, None, "none")
        return AttentionBlock(proj.weight, proj.bias, heads, heads, BlockNorm(norm.weight, norm.bias, norm.eps, True),
                              "sum")

    def forward(self, src: Tensor, tgt_in: Tensor, teacher_forcing: float = 1.0) -> Tensor:
        """Teacher-forced logits [B, T, V] for training (a Transformer always sees the gold prefix)."""
        if teacher_forcing < 1.0:
            raise ConfigError("teacher_forcing below 1 needs a recurrent model; a Transformer always sees the gold "
                              "prefix")
        return self.project(self.decode(tgt_in, self.encode(src)).hidden)
