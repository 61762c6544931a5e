"""LSTM encoder-decoder with Luong global attention (reference C), behind the same protocol as the Transformer.

The encoder is a multi-layer LSTM over the source (packed, so padding never enters a state); the decoder LSTM
starts from the encoder's final states. At every target step the decoder state ``h_t`` scores each encoder state
``h_s`` (``dot``, ``general`` or ``concat``), a softmax over source positions gives the alignment, the context is
the weighted sum of encoder states, and the attentional state ``tanh(W_c [c_t; h_t])`` feeds the output softmax.

Its one attention is reported as cross-attention with one layer and one head ([B, 1, 1, S] per step), so search,
events and views treat it like any other model. Its probe points (``engine.models.probes``) are fewer than a
Transformer's, since its layers run fused inside ``nn.LSTM``: ``embed.src``, ``enc.out`` (the encoder states),
``embed.tgt``, ``dec.0.cross.weights`` ([B, 1, T, S]), ``dec.0.cross.out`` (the attentional states) and ``logits``.
Names: B batch, S source length, T target length, E embedding width, Hd LSTM width, A attentional-state width (E
with a tied output, else Hd).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnviz.engine.config import ModelConfig
from attnviz.engine.models.cache import grouped, grouping, owners
from attnviz.engine.models.probes import Plan, ProbeBoard, tap
from attnviz.engine.models.protocol import Decoded, Encoded, IncrementalModel
from attnviz.engine.text.vocab import PAD_ID

State = tuple[Tensor, Tensor]  # LSTM (h, c), each [layers, B, Hd]


@dataclass
class RNNEncoded(Encoded):
    state: State | None = field(default=None)  # the encoder's final (h, c)


@dataclass
class RNNCache:
    """What decoding carries from step to step: the scored source (once per sentence, shared by its beam
    hypotheses: ``engine.models.cache``) and the decoder LSTM's state (one per row)."""

    memory: Tensor  # [B, S, Hd] encoder states (the values)
    keys: Tensor  # [B, S, Hd] encoder states as the score function needs them
    mask: Tensor  # [B, 1, 1, S], True at real source tokens
    state: State  # [layers, N, Hd] each; N = B * hyps
    length: int = 0  # target positions fed so far
    hyps: int = 1  # rows per sentence: row r decodes sentence r // hyps

    def select(self, index: Tensor) -> RNNCache:
        """Reorder or subset the rows (beam search); the source stays shared unless the selection mixes sentences."""
        h, c = self.state
        group = grouping(index, self.memory.size(0), self.hyps)
        sentence = owners(index, self.hyps)
        pick = lambda t: t if group else t.index_select(0, sentence)  # noqa: E731
        return RNNCache(pick(self.memory), pick(self.keys), pick(self.mask),
                        (h.index_select(1, index), c.index_select(1, index)), self.length, group or 1)


PROBES = ("embed.src", "enc.out", "embed.tgt", "dec.0.cross.weights", "dec.0.cross.out", "logits")


class LuongAttention(nn.Module):
    """Global attention: scores, masked softmax over the source, context and attentional state; its weights pass
    ``dec.0.cross.weights`` as one head (where ``engine.search.head_mask`` switches it off)."""

    def __init__(self, hidden: int, out_dim: int, score: str):
        super().__init__()
        self.score, self.scale = score, hidden ** -0.5
        if score == "general":
            self.w_a = nn.Linear(hidden, hidden, bias=False)
        elif score == "concat":
            self.w_key = nn.Linear(hidden, hidden, bias=False)  # W [h_t; h_s] = W_q h_t + W_k h_s
            self.w_query = nn.Linear(hidden, hidden)
            self.v = nn.Linear(hidden, 1, bias=False)
        self.w_c = nn.Linear(2 * hidden, out_dim, bias=False)

    def keys(self, memory: Tensor) -> Tensor:
        """Encoder states prepared once per sentence for the score function."""
        if self.score == "general":
            return self.w_a(memory)
        if self.score == "concat":
            return self.w_key(memory)
        return memory

    def forward(self, h: Tensor, keys: Tensor, memory: Tensor, mask: Tensor, plan: Plan | None
                ) -> tuple[Tensor, Tensor]:
        """Decoder states ``h`` [B, T, Hd] -> attentional states [B, T, A] and alignment weights [B, T, S]."""
        if self.score == "concat":
            # [B, T, S, Hd] -> [B, T, S]
            scores = self.v(torch.tanh(self.w_query(h)[:, :, None] + keys[:, None])).squeeze(-1)
        else:  # scaled by 1/sqrt(Hd): unscaled, uniform(-0.1, 0.1) weights give scores of about +-10 and a softmax
            # saturated on one source position from the first step, whose gradient never lets attention learn
            scores = h @ keys.transpose(1, 2) * self.scale  # [B, T, Hd] x [B, Hd, S] -> [B, T, S]
        weights = scores.masked_fill(~mask[:, 0], float("-inf")).softmax(dim=-1)  # mask [B, 1, 1, S] -> [B, 1, S]
        if plan is not None:  # as one head: [B, T, S] -> [B, 1, T, S] and back
            weights = plan.at("dec.0.cross.weights", weights[:, None])[:, 0]
        context = weights @ memory  # [B, T, S] x [B, S, Hd] -> [B, T, Hd]
        return tap(plan, "dec.0.cross.out", torch.tanh(self.w_c(torch.cat([context, h], dim=-1)))), weights


class RNNAttention(IncrementalModel):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        out_dim = cfg.d_model if cfg.tie_output else cfg.hidden
        between = cfg.dropout if cfg.enc_layers > 1 else 0.0
        self.src_embed = nn.Embedding(cfg.src_vocab_size, cfg.d_model)
        self.tgt_embed = nn.Embedding(cfg.tgt_vocab_size, cfg.d_model)
        self.encoder = nn.LSTM(cfg.d_model, cfg.hidden, cfg.enc_layers, batch_first=True, dropout=between)
        self.decoder = nn.LSTM(cfg.d_model, cfg.hidden, cfg.dec_layers, batch_first=True, dropout=between)
        self.attention = LuongAttention(cfg.hidden, out_dim, cfg.score)
        self.drop = nn.Dropout(cfg.dropout)
        self.out_proj = nn.Linear(out_dim, cfg.tgt_vocab_size)
        for p in self.parameters():
            nn.init.uniform_(p, -0.1, 0.1)
        if cfg.tie_output:
            self.out_proj.weight = self.tgt_embed.weight
        self.probes = ProbeBoard(PROBES)

    def encode(self, src: Tensor, need_weights: bool = False) -> RNNEncoded:
        """``src`` [B, S] -> encoder states [B, S, Hd] (zero at padding) and the final (h, c); no self-attention."""
        mask = (src != PAD_ID)[:, None, None, :]  # [B, 1, 1, S]
        lengths = mask.sum(dim=-1).flatten().clamp(min=1).cpu()
        plan = self.probes.plan()
        embedded = self.drop(tap(plan, "embed.src", self.src_embed(src)))
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        out, state = self.encoder(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))  # [B, S, Hd]
        return RNNEncoded(tap(plan, "enc.out", memory), mask, [], state)

    def start(self, enc: RNNEncoded) -> RNNCache:
        if enc.state is None:
            raise ValueError("an LSTM decoder starts from the encoder's final states, which this encoding lacks")
        return RNNCache(enc.memory, self.attention.keys(enc.memory), enc.mask, enc.state)

    def decode(self, tgt: Tensor, enc: RNNEncoded | None, need_weights: bool = False,
               cache: RNNCache | None = None) -> Decoded:
        """Decode ``tgt`` [B, T] from the encoder's state (no cache) or after the cached steps (which it extends)."""
        keep = cache is not None
        if cache is None:
            if enc is None:
                raise ValueError("decoding without a cache needs the encoded source")
            cache = self.start(enc)
        plan = self.probes.plan()
        h, state = self.decoder(self.drop(tap(plan, "embed.tgt", self.tgt_embed(tgt))), cache.state)  # [N, T, Hd]
        # a sentence's hypotheses score its source side by side: [B, hyps * T, Hd], one row each again after
        hidden, weights = self.attention(grouped(h, cache.hyps), cache.keys, cache.memory, cache.mask, plan)
        hidden, weights = hidden.view(*h.shape[:2], -1), weights.view(*h.shape[:2], -1)
        if keep:
            cache.state, cache.length = state, cache.length + tgt.size(1)
        return Decoded(hidden, [], [weights[:, None]] if need_weights else [])  # one head: [B, T, S] -> [B, 1, T, S]

    def project(self, hidden: Tensor) -> Tensor:
        return tap(self.probes.plan(), "logits", self.out_proj(self.drop(hidden)))  # [B, T, A] -> [B, T, V]

    def forward(self, src: Tensor, tgt_in: Tensor, teacher_forcing: float = 1.0) -> Tensor:
        """Logits [B, T, V]; with ``teacher_forcing`` < 1 each step is fed, per sentence and at random, the gold
        token or the model's own previous choice (argmax)."""
        enc = self.encode(src)
        if teacher_forcing >= 1.0:
            return self.project(self.decode(tgt_in, enc).hidden)
        cache, logits = self.start(enc), []
        token = tgt_in[:, 0]
        for t in range(tgt_in.size(1)):
            step_logits = self.project(self.decode(token[:, None], None, False, cache).hidden[:, -1])  # [B, V]
            logits.append(step_logits)
            if t + 1 < tgt_in.size(1):
                gold = torch.rand(token.size(0), device=token.device) < teacher_forcing
                token = torch.where(gold, tgt_in[:, t + 1], step_logits.argmax(-1))
        return torch.stack(logits, dim=1)  # T x [B, V] -> [B, T, V]
