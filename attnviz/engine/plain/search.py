"""The numpy network (``engine.plain.model``) as a ``BatchNetwork``: greedy and beam search of a padded batch of
sources run the loops of ``engine.search.batch``, the torch path's own, with the rules of ``engine.search.rules``
(the bans and forced tokens here are their numpy twins; pruning, ranking and stopping are the same functions).

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
from attnviz.engine.search.batch import beam_search, greedy_search
from attnviz.engine.search.limit import StepCallback, capped_limit
from attnviz.engine.search.rules import Candidate, banned_tokens, forced_token, not_a_number
from attnviz.engine.text.vocab import PAD_ID, SOS_ID

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


class PlainBatch:
    """A padded batch of sources [B, S] encoded by the numpy ``model``, decoded by the loops of
    ``engine.search.batch`` under ``decode``'s rules, ids mapped through ``cols``."""

    def __init__(self, model: PlainMarian, src: np.ndarray, decode: DecodeConfig, cols: Columns):
        self.model, self.decode, self.cols = model, decode, cols
        self.cache = model.start(*model.encode(src))

    def _logits(self, tokens: Sequence[int]) -> np.ndarray:
        return _checked(self.model.step(np.asarray(tokens, dtype=np.int64), self.cache))

    def choose(self, tokens: Sequence[int], prefixes: Sequence[Sequence[int]], t: int, limit: int) -> list[int]:
        """The argmax of the logits themselves: the log-softmax subtracts one constant a row."""
        logits = self._logits(tokens)
        logits[:, self.cols.never] = NEG_INF
        scores = constrain(logits, prefixes, t, limit, self.decode, self.cols)
        return self.cols.ids[scores.argmax(-1)].tolist()

    def log_probs(self, tokens: Sequence[int], prefixes: Sequence[Sequence[int]], t: int, limit: int) -> np.ndarray:
        logp = log_probs(self._logits(tokens), self.decode, self.cols)
        return constrain(logp, prefixes, t, limit, self.decode, self.cols)

    def candidates(self, scores: np.ndarray, logp: np.ndarray, base: int, width: int) -> list[Candidate]:
        """They are among each row's ``width`` best tokens (a row's extensions rank as its log-probabilities), so
        only those are added up and sorted."""
        rows = logp[base:base + len(scores)]
        n, vocab = rows.shape
        width = min(width, vocab)
        top = np.argpartition(rows, vocab - width, axis=1)[:, vocab - width:]  # [n, width]
        total = (scores[:, None] + np.take_along_axis(rows, top, axis=1)).ravel()
        flat = (np.arange(n)[:, None] * vocab + top).ravel()
        order = np.lexsort((flat, -total))[:width]  # best first; ties in the flattened index's order (as topk's)
        return [Candidate(float(total[i]), int(flat[i]) // vocab, int(self.cols.ids[flat[i] % vocab])) for i in order]

    def keep(self, rows: Sequence[int], hyps: int) -> None:
        self.cache = self.cache.select(np.asarray(rows, dtype=np.int64), hyps)


def search(model: PlainMarian, src: np.ndarray, decode: DecodeConfig, cols: Columns,
           on_step: StepCallback | None = None) -> list[list[int]]:
    """Greedy (``decode.beam`` 1) or beam search of a padded batch [B, S]: each sentence's attnviz ids up to
    (without) ``<eos>``; ``on_step`` hears of each step."""
    net, limit = PlainBatch(model, src, decode, cols), capped_limit(decode.max_len, model.max_target_len)
    if decode.beam > 1:
        return beam_search(net, src.shape[0], decode, limit, on_step)
    return greedy_search(net, src.shape[0], limit, on_step)
