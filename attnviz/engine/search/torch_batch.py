"""Batched search over a torch network (``greedy_batch``, ``beam_batch``): ``TorchBatch`` answers the loops of
``engine.search.batch`` for any model of the incremental protocol, and the scoring helpers the one-sentence
searches (``engine.search.greedy``, ``engine.search.beam``) share with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from attnviz.engine.config import DecodeConfig
from attnviz.engine.models.protocol import SearchModel
from attnviz.engine.search.batch import beam_search, greedy_search
from attnviz.engine.search.head_mask import heads_off
from attnviz.engine.search.limit import StepCallback, capped_limit
from attnviz.engine.search.rules import Candidate, constrain, log_probs
from attnviz.engine.search.shortlist import Restriction, step_logits
from attnviz.engine.text.vocab import PAD_ID, SOS_ID


def device_of(model: SearchModel) -> torch.device:
    return next(model.parameters()).device


def step_limit(model: SearchModel, max_len: int) -> int:
    """Output tokens a search may produce: ``max_len``, capped by the model's target position table."""
    return capped_limit(max_len, model.max_target_len)


def allowed_logits(logits: Tensor) -> Tensor:
    """Float logits with ``<pad>`` and ``<sos>`` ruled out: a search may never choose them."""
    logits = logits.float().clone()
    logits[..., PAD_ID] = float("-inf")
    logits[..., SOS_ID] = float("-inf")
    return logits


def forcing(logits: Tensor, t: int, forced: Sequence[int], zero: bool = False) -> Tensor:
    """``logits`` [..., V] at step ``t``, every token but ``forced[t]`` ruled out while forced ids remain; the forced
    token keeps its score, or takes log-probability 0 with ``zero`` (as transformers forces a token: a search its
    authors configured ranks its hypotheses so)."""
    if t >= len(forced):
        return logits
    kept = torch.full_like(logits, float("-inf"))
    kept[..., forced[t]] = 0.0 if zero else logits[..., forced[t]]
    return kept


def extensions(scores: Tensor, logp: Tensor, width: int) -> list[Candidate]:
    """The ``width`` best extensions of hypotheses with ``scores`` [n] by next-token ``logp`` [n, V], best first."""
    vocab = logp.size(-1)
    total = (scores[:, None] + logp).view(-1)
    top_scores, top_idx = total.topk(min(width, total.numel()))
    return [Candidate(s, i // vocab, i % vocab) for s, i in zip(top_scores.tolist(), top_idx.tolist())]


class TorchBatch:
    """A padded batch of sources [B, S] encoded by ``model``, decoded by the loops of ``engine.search.batch``:
    ``decode``'s rules (None: only ``<pad>``/``<sos>`` ruled out, for greedy search), the ``forced`` ids first (a
    multilingual model's target language tag), ``restricted``: a vocabulary shortlist."""

    def __init__(self, model: SearchModel, src: Tensor, decode: DecodeConfig | None, forced: Sequence[int] = (),
                 restricted: Restriction | None = None):
        model.eval()
        self.model, self.decode, self.forced, self.restricted = model, decode, forced, restricted
        self.device = device_of(model)
        self.cache = model.start(model.encode(src.to(self.device)))

    def _logits(self, tokens: Sequence[int]) -> Tensor:
        ids = torch.tensor(list(tokens), dtype=torch.long, device=self.device)
        return step_logits(self.model, ids, self.cache, self.restricted)

    def choose(self, tokens: Sequence[int], prefixes: Sequence[Sequence[int]], t: int, limit: int) -> list[int]:
        logits = self._logits(tokens)
        if self.decode is None:
            scores = allowed_logits(logits)
        else:
            scores = constrain(log_probs(logits, self.decode), prefixes, t, limit, self.decode)
        return forcing(scores, t, self.forced).argmax(-1).tolist()

    def log_probs(self, tokens: Sequence[int], prefixes: Sequence[Sequence[int]], t: int, limit: int) -> Tensor:
        assert self.decode is not None, "beam search scores by its decoding settings"
        logp = constrain(log_probs(self._logits(tokens), self.decode), prefixes, t, limit, self.decode)
        return forcing(logp, t, self.forced, zero=self.decode.configured).cpu()  # [rows, V]

    def candidates(self, scores: np.ndarray, logp: Tensor, base: int, width: int) -> list[Candidate]:
        return extensions(torch.from_numpy(scores), logp[base:base + len(scores)], width)

    def keep(self, rows: Sequence[int], hyps: int) -> None:
        self.cache = self.cache.select(torch.tensor(list(rows), dtype=torch.long, device=self.device))


@torch.inference_mode()
def greedy_batch(model: SearchModel, src: Tensor, max_len: int = 50, decode: DecodeConfig | None = None,
                 forced: Sequence[int] = (), restricted: Restriction | None = None,
                 on_step: StepCallback | None = None) -> list[list[int]]:
    """Greedy search for a padded batch [B, S]; returns each sentence's ids up to (without) ``<eos>``, the
    ``forced`` ids first. ``decode``'s rules (``engine.search.rules``: bans, forced tokens) apply when given;
    ``restricted``: a vocabulary shortlist; ``on_step(t, limit)`` hears of each step done."""
    net = TorchBatch(model, src, decode, forced, restricted)
    return greedy_search(net, src.size(0), step_limit(model, max_len), on_step)


@torch.inference_mode()
def beam_batch(model: SearchModel, src: Tensor, decode: DecodeConfig, forced: Sequence[int] = (),
               restricted: Restriction | None = None, on_step: StepCallback | None = None) -> list[list[int]]:
    """Beam search (width ``decode.beam``) for a padded batch [B, S]; each sentence's best ids without ``<eos>``,
    the ``forced`` ids first (taken with their log-probabilities, as ``beam_steps`` takes them); the heads
    ``decode.heads_off`` names are off throughout."""
    with heads_off(model, decode.heads_off, decode.rescale_heads):
        net = TorchBatch(model, src, decode, forced, restricted)
        return beam_search(net, src.size(0), decode, step_limit(model, decode.max_len), on_step)
