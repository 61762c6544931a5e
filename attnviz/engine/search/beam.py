"""Beam search: batched for corpora (``beam_batch``), and for one sentence as events with every attention map
(``beam_steps``). Both rank with the same rules (``prune``, ``settled``), so they choose the same translation.

At each step the 2 x beam best extensions of the live hypotheses are looked at in order of total log-probability:
the first ``beam`` that do not end are kept; an ``<eos>`` among the first ``beam`` finishes its hypothesis (the
rest are pruned). Finished hypotheses are ranked by score / GNMT length penalty ((5 + length) / 6) ** alpha. A
search stops when it holds ``beam`` finished hypotheses and none alive ranks higher, or at the step limit. A search
its model's authors configured scores, constrains, ranks and stops as transformers does (``engine.search.rules``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import BeamDone, BeamNode, BeamStep, DecodeStep, EncoderPass
from attnviz.engine.models.protocol import SearchModel
from attnviz.engine.search.capture import capture_dtype, encoder_maps, on_host
from attnviz.engine.search.greedy import DecodeInput, device_of, forcing, step_limit
from attnviz.engine.search.head_mask import heads_off
from attnviz.engine.search.limit import StepCallback
from attnviz.engine.search.rules import (
    Candidate,
    Pruned,
    constrain,
    forced_token,
    length_penalty,  # noqa: F401 (part of this module's interface: tests and tools rank with it)
    log_probs,
    normalised,
    prune,
    search_settled,
    settled,  # noqa: F401 (as length_penalty)
)
from attnviz.engine.search.shortlist import Restriction, step_logits
from attnviz.engine.text.vocab import EOS_ID, SOS_ID, Vocab

NEG_INF = float("-inf")


def _candidates(scores: Tensor, logp: Tensor, width: int) -> list[Candidate]:
    """The ``width`` best extensions of hypotheses with ``scores`` [n] by next-token ``logp`` [n, V]."""
    vocab = logp.size(-1)
    total = (scores[:, None] + logp).view(-1)
    top_scores, top_idx = total.topk(min(width, total.numel()))
    return [Candidate(s, i // vocab, i % vocab) for s, i in zip(top_scores.tolist(), top_idx.tolist())]


@torch.inference_mode()
def beam_batch(model: SearchModel, src: Tensor, decode: DecodeConfig, forced: Sequence[int] = (),
               restricted: Restriction | None = None, on_step: StepCallback | None = None) -> list[list[int]]:
    """Beam search (width ``decode.beam``) for a padded batch [B, S]; each sentence's best ids without ``<eos>``,
    the ``forced`` ids first (taken with their log-probabilities, as ``beam_steps`` takes them); ``restricted``: a
    vocabulary shortlist (``engine.search.shortlist``); ``on_step(t, limit)`` hears of each step done.

    The first step runs one row per sentence (its hypotheses all start alike); then all B x beam hypotheses run as
    one batch with the cache, a dead slot repeating a live row at score -inf.
    """
    model.eval()
    device, b, beam = device_of(model), src.size(0), decode.beam
    with heads_off(model, decode.heads_off, decode.rescale_heads):
        cache = model.start(model.encode(src.to(device)))
        scores = torch.zeros((b, 1))
        tokens = torch.full((b,), SOS_ID, dtype=torch.long, device=device)
        history: list[list[int]] = [[] for _ in range(b)]
        finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
        steps = step_limit(model, decode.max_len)
        for t in range(steps):
            logits = step_logits(model, tokens, cache, restricted)
            logp = constrain(log_probs(logits, decode), history, t, steps, decode)
            logp = forcing(logp, t, forced, zero=decode.configured).cpu()  # [B * rows, V]
            rows, picked, new_scores, done = _advance(logp, scores, history, finished, t, (steps, beam), decode)
            if on_step is not None:
                on_step(t + 1, steps)
            if t == steps - 1 or all(done):
                break
            history = [history[r] + [tok] for r, tok in zip(rows, picked)]
            tokens, scores = torch.tensor(picked, device=device), new_scores
            cache = cache.select(torch.tensor(rows, device=device))
    return [max(f, key=lambda x: x[0])[1] if f else [] for f in finished]


def _advance(logp: Tensor, scores: Tensor, history: list[list[int]], finished: list[list[tuple[float, list[int]]]],
             t: int, limits: tuple[int, int], decode: DecodeConfig) -> tuple[list[int], list[int], Tensor, list[bool]]:
    """One step of ``beam_batch`` over every sentence's ``scores.size(1)`` rows: the finished hypotheses join
    ``finished``; returns the rows kept (``beam`` a sentence, a dead slot repeating its first row), their tokens,
    their scores [B, beam] and whether each sentence's search is settled."""
    steps, beam = limits
    b, width = scores.shape
    new_scores = torch.full((b, beam), NEG_INF)
    rows, picked, done = [], [], []
    for i in range(b):
        base = i * width
        split = prune(_candidates(scores[i], logp[base:base + width], 2 * beam), beam, t == steps - 1)
        for c in split.ended:
            ids = history[base + c.origin] + ([] if c.token == EOS_ID else [c.token])
            finished[i].append((normalised(c.score, t + 1, decode), ids))
        for slot, c in enumerate(split.kept):
            new_scores[i, slot] = c.score
        rows += [base + c.origin for c in split.kept] + [base] * (beam - len(split.kept))
        picked += [c.token for c in split.kept] + [EOS_ID] * (beam - len(split.kept))
        done.append(search_settled([s for s, _ in finished[i]], new_scores[i].max().item(), t, steps, decode))
    return rows, picked, new_scores, done


class _Expansion(NamedTuple):
    """What one live hypothesis' step computed, shared by every candidate that extends it."""

    topk: tuple[tuple[str, float], ...]
    entropy: float
    self_rows: np.ndarray | None  # [L, H, t + 1]
    cross_rows: np.ndarray | None  # [L, H, S]


def _expansions(logp: Tensor, self_rows, cross_rows, vocab: Vocab, k: int, kept: torch.dtype) -> list[_Expansion]:
    probs = logp.exp()
    top_p, top_i = probs.topk(min(k, probs.size(-1)), dim=-1)
    entropy = -(probs * logp).nan_to_num().sum(-1)
    self_np, cross_np = on_host(self_rows, kept), on_host(cross_rows, kept)
    return [_Expansion(tuple((vocab.token(i), p) for p, i in zip(top_p[r].tolist(), top_i[r].tolist())),
                       float(entropy[r]), None if self_np is None else self_np[r],
                       None if cross_np is None else cross_np[r]) for r in range(logp.size(0))]


@torch.inference_mode()
def beam_steps(model: SearchModel, source: DecodeInput, tgt_vocab: Vocab,
               decode: DecodeConfig) -> Iterator[EncoderPass | BeamStep | BeamDone]:
    """Beam search of one input as events: an ``EncoderPass``, a ``BeamStep`` per step (every candidate with its
    status and attention rows) and a ``BeamDone`` ranking the finished hypotheses.

    ``source.forced`` ids are taken first (one hypothesis), as in ``decoding.decode_steps``.
    """
    model.eval()
    device, beam, forced = device_of(model), decode.beam, list(source.forced)
    gates = lambda: heads_off(model, decode.heads_off, decode.rescale_heads)  # noqa: E731 (around model calls)
    with gates():
        enc = model.encode(torch.tensor([list(source.src_ids)], dtype=torch.long, device=device), need_weights=True)
        cache = model.start(enc)
    precision = capture_dtype(model)
    yield EncoderPass(tuple(source.src_tokens), encoder_maps(enc.attention, precision), tuple(source.warnings),
                      tuple(source.roles))
    live: Sequence[BeamNode | None] = [None]  # the hypotheses the cache rows hold; None: the root
    scores, tokens = torch.zeros(1), torch.tensor([SOS_ID], device=device)
    finished: list[tuple[float, BeamNode]] = []  # (normalised score, hypothesis)
    steps, next_id = step_limit(model, decode.max_len), 0
    prefixes: list[list[int]] = [[]]  # each live hypothesis' output ids, for the rules' bans
    for t in range(steps):
        with gates():
            logits, self_rows, cross_rows = model.step(tokens, cache, True)
        logp = log_probs(logits, decode).cpu()  # [n, V]
        expansions = _expansions(logp, self_rows, cross_rows, tgt_vocab, decode.topk, precision)
        if t < len(forced):
            split = Pruned([], [], [])
            taken = 0.0 if decode.configured else float(logp[0, forced[t]])  # as ``forcing`` scores it
            cand = Candidate(float(scores[0]) + taken, 0, int(forced[t]))
            (split.ended if cand.token == EOS_ID or t == steps - 1 else split.kept).append(cand)
        else:
            split = prune(_candidates(scores, constrain(logp, prefixes, t, steps, decode), 2 * beam), beam,
                          t == steps - 1)
        ruled = t < len(forced) or forced_token(t, steps, decode) is not None  # given, not chosen
        nodes = []
        for status, group in (("alive", split.kept), ("finished", split.ended), ("pruned", split.dropped)):
            for c in group:
                exp, parent = expansions[c.origin], live[c.origin]
                step = DecodeStep(index=t, token=tgt_vocab.token(c.token), token_id=c.token,
                                  probability=float(logp[c.origin, c.token].exp()), topk=exp.topk,
                                  entropy=exp.entropy, self_attention=exp.self_rows, cross_attention=exp.cross_rows,
                                  src_len=enc.mask.size(-1), forced=ruled)
                rank = normalised(c.score, t + 1, decode) if status == "finished" else None
                nodes.append(BeamNode(next_id, -1 if parent is None else parent.id, step, c.score, status, rank))
                next_id += 1
        yield BeamStep(t, tuple(nodes))
        finished += [(n.normalised, n) for n in nodes if n.status == "finished" and n.normalised is not None]
        kept = [n for n in nodes if n.status == "alive"]
        best_alive = max((n.score for n in kept), default=NEG_INF)
        if search_settled([score for score, _ in finished], best_alive, t, steps, decode):
            break
        prefixes = [[*prefixes[c.origin], c.token] for c in split.kept]
        rows = torch.tensor([c.origin for c in split.kept], device=device)
        live, scores = kept, torch.tensor([c.score for c in split.kept])
        tokens, cache = torch.tensor([c.token for c in split.kept], device=device), cache.select(rows)
    yield BeamDone(tuple(n.id for _, n in sorted(finished, key=lambda f: -f[0])))
