"""A decoder-only LLM (Llama-, Mistral-, Qwen- and Gemma-family folders) on attnviz's translation protocol: the
prompt is the source, its prefill the encoder pass, and every output step's attention splits into the part over the
prompt (the LLM's "cross-attention") and the part over the output so far (its decoder self-attention).

The prompt's last token (the end of the chat template's generation prompt, or of a bare prompt) is the first step's
input, as ``<sos>`` is an encoder-decoder's: ``encode`` reads every token of each row but its last, and ``step`` at
the first position feeds that last token. Rows of a batch are right-padded; each row's positions count its own
tokens, so a padded batch computes what its rows would alone. attnviz's ids are the folder's plus 4 (its specials
``<unk> <pad> <sos> <eos>`` first): the embedding is read without a copy, and ``project`` puts ``<eos>`` at the
logit of the most probable of the folder's end tokens, which is what ``generate`` stops at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import torch
from torch import Tensor, nn

from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import ConfigError
from attnviz.engine.models.cache import select_rows
from attnviz.engine.models.gemma_layers import GemmaLayer
from attnviz.engine.models.layers import LayerCache, widened
from attnviz.engine.models.linear import Linear
from attnviz.engine.models.llm_arch import LLMArch
from attnviz.engine.models.llm_layers import LLMLayer
from attnviz.engine.models.probes import BlockNames, LayerNames, ProbeBoard, ProbeError, tap
from attnviz.engine.models.protocol import AttentionBlock, Decoded, Encoded, IncrementalModel
from attnviz.engine.models.rope import inverse_frequencies, rotations
from attnviz.engine.text.vocab import EOS_ID, PAD_ID, SOS_ID

SPECIALS = 4  # attnviz's ids below this are its own specials; id i >= 4 is the folder's i - 4
# each family's layer form (``LLMArch.family``): a new form is a module of its own overriding ``LLMLayer``
LAYER_FORMS: dict[str, type[LLMLayer]] = {"llama": LLMLayer, "gemma": GemmaLayer}


@dataclass
class PromptEncoded(Encoded):
    """The prompt's prefill: its keys and values per layer, and what the first step needs."""

    keys: list[Tensor] = field(default_factory=list)  # per layer [B, G, S, dh]
    values: list[Tensor] = field(default_factory=list)
    positions: Tensor | None = None  # [B, S] each prompt slot's position
    lead: Tensor | None = None  # [B] the folder id of each row's last prompt token: the first step's input
    lead_position: Tensor | None = None  # [B]
    first: Primed | None = None  # the first step, already run with the prefill (see ``CausalLM.encode``)


@dataclass
class Primed:
    """The first output step computed in the prompt's own pass: the lead token's hidden state [B, 1, D] (before
    the final norm) and, when weights were asked, its attention rows [B, H, 1, S' + 1] per layer."""

    hidden: Tensor
    rows: list[Tensor]
    weighed: bool

    def select(self, index: Tensor) -> Primed:
        return Primed(self.hidden[index], [r[index] for r in self.rows], self.weighed)


@dataclass
class PromptCache:
    """Keys and values of the prompt and of the output so far, in one buffer per layer (prompt slots first)."""

    layers: list[LayerCache]
    key_mask: Tensor  # [N, S] True at the prompt's real tokens
    positions: Tensor  # [N, S] prompt slots' positions
    lead: Tensor  # [N]
    lead_position: Tensor  # [N] the position of the first step's input
    length: int = 0  # output positions fed so far
    hyps: int = 1
    primed: Primed | None = None  # the first step, run with the prefill: its keys fill the first output slot

    @property
    def prompt(self) -> int:
        return self.key_mask.size(1)

    def select(self, index: Tensor) -> PromptCache:
        """Reorder or subset the rows (beam search): every tensor follows its row."""
        filled = self.prompt + self.length + (self.primed is not None)
        layers = [LayerCache(None, None, select_rows(c.self_k, index, filled), select_rows(c.self_v, index, filled),
                             c.limit) for c in self.layers]
        primed = None if self.primed is None else self.primed.select(index)
        return PromptCache(layers, self.key_mask[index], self.positions[index], self.lead[index],
                           self.lead_position[index], self.length, primed=primed)


class LLMBody(nn.Module):
    """The embedding, the layers and the final norm, under the folders' ``model.`` prefix."""

    def __init__(self, cfg: ModelConfig, arch: LLMArch):
        super().__init__()
        form = LAYER_FORMS[arch.family]
        self.embed_tokens = nn.Embedding(arch.vocab, cfg.d_model)
        self.layers = nn.ModuleList(form(cfg, arch, i) for i in range(cfg.dec_layers))
        self.norm = form.norm(cfg.d_model, cfg.ln_eps)


class CausalLM(IncrementalModel):
    """A Llama-like or Gemma-like decoder (``LLMArch``) reading a prompt as its source."""

    one_stream = True  # the prompt's pass and the output steps run the same layers over one sequence
    computes_at_input_precision = True  # every projection is models.linear.Linear; norms and RoPE follow the input
    answers = frozenset({"attention_block", "run_layer", "read_out"})
    inv_freq: Tensor
    inv_freq_local: Tensor

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg, self.arch = cfg, LLMArch.from_dict(cfg.arch)
        self.arch.check_layers(cfg.dec_layers, cfg.heads)
        arch = self.arch
        self.model = LLMBody(cfg, arch)
        self.lm_head = Linear(cfg.d_model, arch.vocab, bias=False)
        if cfg.tie_output:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.embed_scale = cfg.d_model ** 0.5 if LAYER_FORMS[arch.family].scales_embeddings else 0.0
        self.register_buffer("inv_freq", torch.empty(arch.head_dim // 2), persistent=False)
        self.register_buffer("inv_freq_local", torch.empty(arch.head_dim // 2), persistent=False)
        self.compute_buffers()
        self.probes = ProbeBoard(self._probe_names())

    def compute_buffers(self) -> None:
        """The RoPE frequencies (float32, computed, never stored), also after a build on the meta device."""
        if torch.empty(0).device.type == "meta":
            return
        self.inv_freq = inverse_frequencies(self.arch)
        self.inv_freq_local = inverse_frequencies(self.arch, local=True)

    def _probe_names(self) -> list[str]:
        """The prompt's pass names its points as an encoder's (``embed.src``, ``enc.{l}.*``), the output steps' as a
        decoder's (``embed.tgt``, ``dec.{l}.*``): the same layers, read or changed in the pass asked."""
        def layers(side: str, block: str) -> list[str]:
            found = []
            for i in range(self.cfg.dec_layers):
                names = LayerNames.of(f"{side}.{i}")
                found += [names.input, *BlockNames.of(f"{side}.{i}.{block}"), names.ff, names.out]
            return found

        return ["embed.src", *layers("enc", "attn"), "embed.tgt", *layers("dec", "self"), "dec.final_norm", "logits"]

    def decoder_layers(self) -> list[LLMLayer]:
        return cast("list[LLMLayer]", list(self.model.layers))

    # -- ids and masks -------------------------------------------------------------------------------------------

    def folder_ids(self, ids: Tensor, lead: Tensor | None = None) -> Tensor:
        """attnviz ids -> the model's rows: ``<sos>`` to the lead token; with a folder's vocabulary, ``<eos>`` to its
        first end token and the other specials to row 0."""
        out = (ids - self.arch.offset).clamp(min=0)
        if lead is not None:
            out = torch.where(ids == SOS_ID, lead[:, None], out)
        if self.arch.offset and self.arch.end_ids:
            out = torch.where(ids == EOS_ID, self.arch.end_ids[0], out)
        return out

    def _embed(self, ids: Tensor, name: str, plan) -> Tensor:
        x = self.model.embed_tokens(ids)
        if self.embed_scale:
            x = x * torch.tensor(self.embed_scale, dtype=x.dtype)
        return tap(plan, name, x)

    def _mask(self, sliding: bool, q_pos: Tensor, k_pos: Tensor, k_ok: Tensor, diagonal: bool) -> Tensor | None:
        """[B, 1, T, K]: key j seen from query i when it is real, not later, and (sliding) within the window; with
        ``diagonal`` (the prefill, T == K) every slot also sees itself, so a padding row's softmax is not empty.
        None when every key is seen (the fused kernel's fast path)."""
        seen = (k_pos[:, None, :] <= q_pos[:, :, None]) & k_ok[:, None, :]
        if sliding:
            seen &= q_pos[:, :, None] - k_pos[:, None, :] < self.arch.sliding_window
        if diagonal:
            seen |= torch.eye(seen.size(1), dtype=torch.bool, device=seen.device)
        return None if bool(seen.all()) else seen[:, None]

    def _rope(self, sliding: bool, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """cos and sin of ``positions`` for a full or a sliding layer (Gemma 3's sliding layers have a base of their
        own)."""
        local = sliding and bool(self.arch.rope_local_theta)
        return rotations(self.inv_freq_local if local else self.inv_freq, positions, dtype)

    def _run(self, x: Tensor, positions: Tensor, caches: list[LayerCache], at: int, k_pos: Tensor, k_ok: Tensor,
             need_weights: bool, plan, prompt: bool = False) -> tuple[Tensor, list[Tensor]]:
        """Every layer over ``x`` [B, T, D] at ``positions`` [B, T], writing keys at slot ``at`` of each cache; the
        ``prompt``'s prefill (its probe points named as an encoder's, each slot seeing itself: see ``_mask``) or
        output steps."""
        weights = []
        slides = {layer.sliding for layer in self.decoder_layers()}
        masks = {sliding: self._mask(sliding, positions, k_pos, k_ok, prompt) for sliding in slides}
        ropes = {sliding: self._rope(sliding, positions, x.dtype) for sliding in slides}
        for layer, cache in zip(self.decoder_layers(), caches, strict=True):
            x, w = layer(x, ropes[layer.sliding], cache, at, masks[layer.sliding], need_weights, plan, prompt)
            if w is not None:
                weights.append(w)
        return x, weights

    # -- the protocol ------------------------------------------------------------------------------------------------

    def encode(self, src: Tensor, need_weights: bool = False) -> PromptEncoded:
        """The prompt ``src`` [B, S] (attnviz ids, right-padded) prefilled, each row's last token kept back as the
        first step's input; ``attention`` [B, H, S', S'] per layer over the prompt read (S' = S - 1 unless the rows'
        lengths differ)."""
        real = src != PAD_ID
        count = real.sum(1)
        last = (count - 1).clamp(min=0)
        width = src.size(1) - 1 if bool((last == src.size(1) - 1).all()) else src.size(1)
        plan = self.probes.plan()
        # Rows of one length and nothing probed: the lead token rides in the prefill, so the first step (its query)
        # costs no second pass over the weights; its row and state are kept for ``decode``.
        ride = plan is None and width == src.size(1) - 1 and width > 0
        read = width + ride
        slots = torch.arange(read, device=src.device)
        key_ok = real[:, :read] & ((slots[None] != last[:, None]) | ride)
        positions = (real[:, :read].long().cumsum(1) - 1).clamp(min=0)
        lead = self.folder_ids(src.gather(1, last[:, None]))[:, 0]
        x = self._embed(self.folder_ids(src[:, :read]), "embed.src", plan)
        caches = [LayerCache(None, None) for _ in self.model.layers]
        x, weights = self._run(x, positions, caches, 0, positions, key_ok, need_weights, plan, prompt=True)
        keys = [c.self_k for c in caches if c.self_k is not None]
        values = [c.self_v for c in caches if c.self_v is not None]
        first = Primed(x[:, width:], [w[:, :, width:] for w in weights], need_weights) if ride else None
        return PromptEncoded(x[:, :width], key_ok[:, None, None, :width],
                             [w[:, :, :width, :width] for w in weights] if need_weights else [], keys, values,
                             positions[:, :width], lead, last, first)

    def start(self, enc: Encoded) -> PromptCache:
        if not isinstance(enc, PromptEncoded) or enc.lead is None or enc.positions is None or enc.lead_position is None:
            raise ConfigError("a decoder-only LLM decodes after its own prompt's prefill (encode)")
        limit = enc.mask.size(-1) + self.max_target_len
        layers = []
        for k, v in zip(enc.keys, enc.values, strict=True):
            cache = LayerCache(None, None, limit=limit)
            cache.extend(k, v, 0)
            layers.append(cache)
        return PromptCache(layers, enc.mask[:, 0, 0], enc.positions, enc.lead, enc.lead_position, primed=enc.first)

    def decode(self, tgt: Tensor, enc: Encoded | None, need_weights: bool = False,
               cache: PromptCache | None = None) -> Decoded:
        """Decode ``tgt`` [B, T] after the prompt: the whole output prefix (no cache; ``enc`` the prompt's
        prefill) or the tokens after ``cache.length``. Each layer's weights split into the prompt's columns
        (``cross_attention``) and the output's (``self_attention``)."""
        keep = cache is not None
        if cache is None:
            if enc is None:
                raise ValueError("decoding without a cache needs the encoded prompt")
            cache = self.start(enc)
        n, t, offset, prompt = tgt.size(0), tgt.size(1), cache.length, cache.prompt
        plan = self.probes.plan()
        primed, cache.primed = cache.primed, None
        if keep and primed is not None and t == 1 and plan is None and (primed.weighed or not need_weights) \
                and bool((tgt[:, 0] == SOS_ID).all()):  # the first step, run with the prefill
            cache.length = 1
            rows = primed.rows if need_weights else []
            return Decoded(self.model.norm(primed.hidden), [r[..., prompt:] for r in rows],
                           [r[..., :prompt] for r in rows])
        steps = torch.arange(offset + t, device=tgt.device)
        out_pos = cache.lead_position[:, None] + steps[None]  # [N, offset + T]
        k_pos = torch.cat([cache.positions, out_pos], 1)
        k_ok = torch.cat([cache.key_mask, torch.ones(n, offset + t, dtype=torch.bool, device=tgt.device)], 1)
        x = self._embed(self.folder_ids(tgt, cache.lead), "embed.tgt", plan)
        x, weights = self._run(x, out_pos[:, offset:], cache.layers, prompt + offset, k_pos, k_ok, need_weights,
                               plan)
        if keep:
            cache.length += t
        cross = [w[..., :prompt] for w in weights]
        own = [w[..., prompt:] for w in weights]
        return Decoded(tap(plan, "dec.final_norm", self.model.norm(x)), own, cross)

    def project(self, hidden: Tensor) -> Tensor:
        """Logits [..., 4 + V] of hidden states [..., D]: the folder's V after attnviz's specials, ``<eos>`` holding
        the best end token's logit (the end tokens themselves and the other specials at the lowest finite logit: never
        chosen), float32 at half precision."""
        logits = widened(self.lm_head(hidden))
        if self.arch.final_softcap:
            cap = self.arch.final_softcap
            logits = torch.tanh(logits / cap) * cap
        if not self.arch.offset:  # built over attnviz's vocabulary: its specials are rows of their own
            return tap(self.probes.plan(), "logits", logits)
        never = torch.finfo(logits.dtype).min  # finite: a training loss over these logits stays finite
        specials = logits.new_full((*logits.shape[:-1], SPECIALS), never)
        ends = list(self.arch.end_ids)
        if ends:
            specials[..., EOS_ID] = logits[..., ends].amax(-1)
        shifted = torch.cat([specials, logits], -1)
        if ends:
            shifted[..., [e + SPECIALS for e in ends]] = never
        return tap(self.probes.plan(), "logits", shifted)

    def read_out(self, hidden: Tensor) -> Tensor:
        """Any layer's output [B, T, D] read as the last one's: the final RMSNorm, then the output projection."""
        return self.project(self.model.norm(hidden))

    @property
    def readout(self) -> str:
        return "the final RMSNorm, then the output projection"

    # -- what mixing analyses read (``attribution.mixing``) ------------------------------------------------------------

    def attention_block(self, kind: str, layer: int) -> AttentionBlock:
        """Layer ``layer``'s one attention block, which the prompt's pass (``encoder``) and the output steps
        (``decoder``) both run: output projection, key/value groups, Gemma's post-attention norm."""
        if kind not in ("encoder", "decoder"):
            raise ProbeError(f"A decoder-only LLM has no {kind} attention block: its output reads the prompt through "
                             "its one self-attention.")
        return self.decoder_layers()[layer].block()

    def run_layer(self, side: str, layer: int, x: Tensor, mask: Tensor | None = None,
                  memory: Tensor | None = None, rows: slice | None = None) -> Tensor:
        """Layer ``layer`` alone over whole sequences ``x`` [B, N, D] (the prompt's slots then the decoder inputs,
        at positions 0..N-1, every slot real), causal and (a sliding layer) windowed as in the passes: the output
        [B, N, D], or of the positions ``rows`` alone, every position still giving its key and value. Its probe
        points fire under the output steps' names (``dec.{l}.*``), so an edit of ``dec.{l}.self.v`` reaches every
        position's value vectors; an edit there may return several variants of them ([B', G, N, dh] for a batch of
        one), which then share this pass's weights and give one output each. ``mask`` and ``memory`` are not read:
        one stream has neither."""
        if side != "decoder":
            raise ProbeError(f"A decoder-only LLM runs its layers over one stream (side 'decoder'), not {side!r}.")
        module = self.decoder_layers()[layer]
        positions = torch.arange(x.size(1), device=x.device).expand(x.size(0), -1)
        asking = positions if rows is None else positions[:, rows]
        causal = self._mask(module.sliding, asking, positions, torch.ones_like(positions, dtype=torch.bool), False)
        out, _ = module(x, self._rope(module.sliding, positions, x.dtype), LayerCache(None, None), 0, causal, False,
                        self.probes.plan(), prompt=False, rows=rows)
        return out

    def forward(self, src: Tensor, tgt_in: Tensor, teacher_forcing: float = 1.0) -> Tensor:
        """Logits [B, T, 4 + V] of the output inputs ``tgt_in`` after the prompt ``src`` (teacher forcing)."""
        if teacher_forcing < 1.0:
            raise ConfigError("teacher_forcing below 1 needs a recurrent model; an LLM always sees the gold prefix")
        return self.project(self.decode(tgt_in, self.encode(src)).hidden)

    @property
    def max_source_len(self) -> int:
        return self.cfg.max_positions
