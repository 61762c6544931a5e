"""Batched greedy and beam search: one loop each, over any array backend that answers ``BatchNetwork``.

The torch networks (``engine.search.torch_batch``: ``greedy_batch`` and ``beam_batch``) and the numpy MarianMT of
the plain runtime (``engine.plain.search``) both decode here. The loops own the search (the rows still alive, the
hypotheses, the finished lists, when to stop); a network owns its arrays and its cache, and scores each step with
the rules of ``engine.search.rules`` (bans, forced tokens, the log-softmax). Ids are attnviz's on both sides of the
door. Beam scores are float32 numpy arrays for every backend, so the sums are the same float32 sums.

This module imports no torch: the plain runtime starts without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from attnviz.engine.config import DecodeConfig
from attnviz.engine.search.limit import StepCallback
from attnviz.engine.search.rules import Candidate, normalised, prune, search_settled
from attnviz.engine.text.vocab import EOS_ID, SOS_ID

NEG_INF = np.float32(-np.inf)
Finished = list[list[tuple[float, list[int]]]]  # per sentence: (normalised score, ids) of each ended hypothesis


class BatchNetwork(Protocol):
    """A batch of sentences being decoded: the network's cache of their rows and the step's scoring."""

    def choose(self, tokens: Sequence[int], prefixes: Sequence[Sequence[int]], t: int, limit: int) -> list[int]:
        """Feed ``tokens`` (one a row) and return each row's greedy next id at step ``t`` (rules applied to the
        rows' output ``prefixes``)."""
        ...

    def log_probs(self, tokens: Sequence[int], prefixes: Sequence[Sequence[int]], t: int, limit: int) -> Any:
        """Feed ``tokens`` and return the rows' constrained next-token log-probabilities [rows, V] (the backend's
        array, on the host)."""
        ...

    def candidates(self, scores: np.ndarray, logp: Any, base: int, width: int) -> list[Candidate]:
        """The ``width`` best extensions, best first (ties as ``torch.topk`` breaks them), of the hypotheses with
        ``scores`` [n] held in rows ``base`` to ``base + n`` of ``logp``."""
        ...

    def keep(self, rows: Sequence[int], hyps: int) -> None:
        """Keep the cache's ``rows``, in this order (row j then belongs to sentence j // ``hyps``)."""
        ...


def greedy_search(net: BatchNetwork, sentences: int, limit: int,
                  on_step: StepCallback | None = None) -> list[list[int]]:
    """Greedy search of ``sentences`` rows: each sentence's ids up to (without) ``<eos>``. A finished sentence
    leaves the batch, so a long straggler does not keep the rest computing; ``on_step(t, limit)`` hears of each
    step done."""
    outputs: list[list[int]] = [[] for _ in range(sentences)]
    alive = list(range(sentences))  # the sentence of each row still decoding
    tokens = [SOS_ID] * sentences
    for t in range(limit):
        tokens = net.choose(tokens, [outputs[row] for row in alive], t, limit)
        going = [i for i, tok in enumerate(tokens) if tok != EOS_ID]
        for i in going:
            outputs[alive[i]].append(tokens[i])
        if on_step is not None:
            on_step(t + 1, limit)
        if not going:
            break
        if len(going) < len(tokens):
            alive, tokens = [alive[i] for i in going], [tokens[i] for i in going]
            net.keep(going, 1)
    return outputs


def beam_search(net: BatchNetwork, sentences: int, decode: DecodeConfig, steps: int,
                on_step: StepCallback | None = None) -> list[list[int]]:
    """Beam search (width ``decode.beam``) of ``sentences`` rows: each sentence's best ids without ``<eos>``.

    The first step runs one row a sentence (its hypotheses all start alike); then every sentence holds ``beam``
    rows, a dead slot repeating a live row at score -inf. ``engine.search.rules`` prunes, ranks and stops.
    """
    scores = np.zeros((sentences, 1), dtype=np.float32)
    tokens = [SOS_ID] * sentences
    history: list[list[int]] = [[] for _ in range(sentences)]
    finished: Finished = [[] for _ in range(sentences)]
    for t in range(steps):
        logp = net.log_probs(tokens, history, t, steps)
        rows, tokens, scores, done = _advance(net, logp, scores, (history, finished), (t, steps), decode)
        if on_step is not None:
            on_step(t + 1, steps)
        if t == steps - 1 or all(done):
            break
        history = [history[r] + [tok] for r, tok in zip(rows, tokens)]
        net.keep(rows, decode.beam)
    return [max(found, key=lambda f: f[0])[1] if found else [] for found in finished]


def _advance(net: BatchNetwork, logp: Any, scores: np.ndarray, found: tuple[list[list[int]], Finished],
             when: tuple[int, int], decode: DecodeConfig) -> tuple[list[int], list[int], np.ndarray, list[bool]]:
    """One step over every sentence's ``scores.shape[1]`` rows: the hypotheses that end join ``found``'s finished
    lists; returns the rows kept (``beam`` a sentence), their tokens, their scores [B, beam] and whether each
    sentence's search is settled."""
    history, finished = found
    t, steps = when
    b, width = scores.shape
    new_scores = np.full((b, decode.beam), NEG_INF, dtype=np.float32)
    rows: list[int] = []
    picked: list[int] = []
    done: list[bool] = []
    for i in range(b):
        base = i * width
        split = prune(net.candidates(scores[i], logp, base, 2 * decode.beam), decode.beam, t == steps - 1)
        for c in split.ended:
            ids = history[base + c.origin] + ([] if c.token == EOS_ID else [c.token])
            finished[i].append((normalised(c.score, t + 1, decode), ids))
        for slot, c in enumerate(split.kept):
            new_scores[i, slot] = c.score
        dead = decode.beam - len(split.kept)
        rows += [base + c.origin for c in split.kept] + [base] * dead
        picked += [c.token for c in split.kept] + [EOS_ID] * dead
        done.append(search_settled([s for s, _ in finished[i]], float(new_scores[i].max()), t, steps, decode))
    return rows, picked, new_scores, done
