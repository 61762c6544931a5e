"""Greedy and beam search over the numpy network (``engine.plain.model``), with the rules the torch searches follow
(``engine.search.rules``: the scores, bans, forced tokens, pruning, ranking and stopping are the same functions or
their numpy twins), for a padded batch of sources.

The network's logits come in Marian's column order; ``Columns`` maps attnviz ids to columns and back, so the
embedding is never reordered. ``<pad>`` and ``<sos>`` share one column (attnviz's ``<sos>`` is Marian's decoder start
token, its ``<pad>``), which a search never chooses, so the scores are those of the torch search over attnviz's
order. Greedy search takes the argmax of the logits themselves (the log-softmax subtracts one constant a row).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnviz.engine.config import DecodeConfig
from attnviz.engine.plain.model import PlainMarian
from attnviz.engine.search.limit import StepCallback, capped_limit
from attnviz.engine.search.rules import (
    Candidate,
    banned_tokens,
    forced_token,
    normalised,
    not_a_number,
    prune,
    search_settled,
)
from attnviz.engine.text.vocab import EOS_ID, PAD_ID, SOS_ID

NEG_INF = np.float32(-np.inf)


class Columns:
    """attnviz id -> Marian column (``col``), and back (``ids``; the shared ``<pad>``/``<sos>`` column reads as
    ``<sos>``)."""

    def __init__(self, tgt_order: Sequence[int], columns: int):
        self.col = np.asarray(tgt_order, dtype=np.int64)
        self.ids = np.full(columns, -1, dtype=np.int64)
        self.ids[self.col] = np.arange(len(self.col))
        self.never = sorted({int(self.col[PAD_ID]), int(self.col[SOS_ID])})


def _checked(logits: np.ndarray) -> np.ndarray:
    if not np.isfinite(logits).all() and (np.isnan(logits).any() or (logits == np.inf).any()):
        raise not_a_number("float32")
    return logits


def log_probs(logits: np.ndarray, decode: DecodeConfig, cols: Columns) -> np.ndarray:
    """``rules.log_probs`` over Marian's columns, in place: attnviz's search renormalises without ``<pad>``/``<sos>``,
    a configured one (transformers') takes the log-softmax over the model's vocabulary, then bans ``<pad>``."""
    logits = _checked(logits)
    if not decode.configured:
        logits[:, cols.never] = NEG_INF
    logits -= logits.max(-1, keepdims=True)
    logits -= np.log(np.exp(logits).sum(-1, keepdims=True))
    if decode.configured:
        logits[:, cols.never] = NEG_INF
    return logits


def constrain(scores: np.ndarray, prefixes: Sequence[Sequence[int]], t: int, limit: int, decode: DecodeConfig,
              cols: Columns) -> np.ndarray:
    """``rules.constrain`` over Marian's columns, in place: a forced token holds everything (log 0), bans are -inf."""
    forced = forced_token(t, limit, decode)
    if forced is not None:
        scores[:] = NEG_INF
        scores[:, cols.col[forced]] = 0.0
        return scores
    if decode.no_repeat_ngram or decode.bad_words:
        for row, prefix in enumerate(prefixes):
            banned = banned_tokens(prefix, decode)
            if banned:
                scores[row, cols.col[sorted(banned)]] = NEG_INF
    return scores


def greedy(model: PlainMarian, src: np.ndarray, decode: DecodeConfig, cols: Columns,
           on_step: StepCallback | None = None) -> list[list[int]]:
    """Greedy search of a padded batch [B, S]: each sentence's attnviz ids up to (without) ``<eos>``; finished
    sentences leave the batch (``engine.search.greedy.greedy_batch``); ``on_step`` hears of each step."""
    cache = model.start(*model.encode(src))
    b = src.shape[0]
    outputs: list[list[int]] = [[] for _ in range(b)]
    alive = np.arange(b)
    tokens = np.full(b, SOS_ID, dtype=np.int64)
    limit = capped_limit(decode.max_len, model.max_target_len)
    for t in range(limit):
        logits = _checked(model.step(tokens, cache))
        logits[:, cols.never] = NEG_INF
        scores = constrain(logits, [outputs[row] for row in alive.tolist()], t, limit, decode, cols)
        tokens = cols.ids[scores.argmax(-1)]
        finished = tokens == EOS_ID
        for row, tok in zip(alive.tolist(), tokens.tolist()):
            if tok != EOS_ID:
                outputs[row].append(tok)
        if on_step is not None:
            on_step(t + 1, limit)
        if finished.all():
            break
        if finished.any():
            keep = np.flatnonzero(~finished)
            alive, tokens, cache = alive[keep], tokens[keep], cache.select(keep, 1)
    return outputs


def _candidates(scores: np.ndarray, logp: np.ndarray, width: int, cols: Columns) -> list[Candidate]:
    """The ``width`` best extensions of hypotheses with ``scores`` [n] by next-token ``logp`` [n, V], best first.
    They are among each row's ``width`` best tokens (a row's extensions rank as its log-probabilities), so only
    those are added up and sorted."""
    n, vocab = logp.shape
    width = min(width, vocab)
    top = np.argpartition(logp, vocab - width, axis=1)[:, vocab - width:]  # [n, width]
    total = (scores[:, None] + np.take_along_axis(logp, top, axis=1)).ravel()
    flat = (np.arange(n)[:, None] * vocab + top).ravel()
    order = np.lexsort((flat, -total))[:width]  # best first; ties in the order of the flattened index (as topk's)
    return [Candidate(float(total[i]), int(flat[i]) // vocab, int(cols.ids[flat[i] % vocab])) for i in order]


def beam(model: PlainMarian, src: np.ndarray, decode: DecodeConfig, cols: Columns,
         on_step: StepCallback | None = None) -> list[list[int]]:
    """Beam search of a padded batch [B, S] (``engine.search.beam.beam_batch``): the first step runs one row a
    sentence, then B x beam rows, a dead slot repeating a live row at score -inf; ``on_step`` hears of each step."""
    cache = model.start(*model.encode(src))
    b, width = src.shape[0], decode.beam
    scores = np.zeros((b, 1), dtype=np.float32)  # float32 sums, as the torch search adds them
    tokens = np.full(b, SOS_ID, dtype=np.int64)
    history: list[list[int]] = [[] for _ in range(b)]
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    steps = capped_limit(decode.max_len, model.max_target_len)
    for t in range(steps):
        logp = constrain(log_probs(model.step(tokens, cache), decode, cols), history, t, steps, decode, cols)
        rows, picked, new_scores, done = _advance(logp, scores, (history, finished), t, steps, decode, cols)
        if on_step is not None:
            on_step(t + 1, steps)
        if t == steps - 1 or all(done):
            break
        history = [history[r] + [tok] for r, tok in zip(rows, picked)]
        tokens, scores = np.asarray(picked, dtype=np.int64), new_scores
        cache = cache.select(np.asarray(rows, dtype=np.int64), width)
    return [max(f, key=lambda x: x[0])[1] if f else [] for f in finished]


def _advance(logp: np.ndarray, scores: np.ndarray, found: tuple[list[list[int]], list[list[tuple[float, list[int]]]]],
             t: int, steps: int, decode: DecodeConfig, cols: Columns
             ) -> tuple[list[int], list[int], np.ndarray, list[bool]]:
    """One step over every sentence's rows (``engine.search.beam._advance``): finished hypotheses join ``found``'s
    second list; returns the rows kept, their tokens, their scores [B, beam] and whether each search is settled."""
    history, finished = found
    b, width = scores.shape
    new_scores = np.full((b, decode.beam), NEG_INF, dtype=np.float32)
    rows, picked, done = [], [], []
    for i in range(b):
        base = i * width
        split = prune(_candidates(scores[i], logp[base:base + width], 2 * decode.beam, cols), decode.beam,
                      t == steps - 1)
        for c in split.ended:
            ids = history[base + c.origin] + ([] if c.token == EOS_ID else [c.token])
            finished[i].append((normalised(c.score, t + 1, decode), ids))
        for slot, c in enumerate(split.kept):
            new_scores[i, slot] = c.score
        rows += [base + c.origin for c in split.kept] + [base] * (decode.beam - len(split.kept))
        picked += [c.token for c in split.kept] + [EOS_ID] * (decode.beam - len(split.kept))
        done.append(search_settled([s for s, _ in finished[i]], float(new_scores[i].max()), t, steps, decode))
    return rows, picked, new_scores, done
