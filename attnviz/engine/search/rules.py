"""The rules a search follows besides choosing likely tokens: how next-token log-probabilities are scored, what an
output may not contain or must contain (no repeated n-gram, banned token sequences, a forced first and last token),
how a finished hypothesis is ranked for its length, and when a beam search is over.

attnviz's own search renormalises over the tokens it may choose, ranks with the GNMT penalty and stops by
``settled``. A search its authors configured (``DecodeConfig.configured``: an imported folder's
``generation_config.json``, read by ``engine.hub.generation``) runs as transformers' ``generate`` does (its
``LogitsProcessor``s and ``_beam_search`` in transformers 5): log-softmax over the model's vocabulary, then the bans
as -inf without renormalising, a forced token at log-probability 0; finished scores divided by the number of
generated tokens (``<eos>`` included, the decoder's start token not) to the power ``length_penalty``; and its three
``early_stopping`` rules. Both searches (``engine.search.greedy`` and ``engine.search.beam``) call these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import CheckpointError
from attnviz.engine.text.vocab import EOS_ID, PAD_ID, SOS_ID

if TYPE_CHECKING:  # torch's tensors are only typed here: the plain runtime (``engine.plain``) reads the pure rules
    from torch import Tensor

NEG_INF = float("-inf")


def not_a_number(dtype: str) -> CheckpointError:
    """What a search says when the model's logits hold NaN or +inf (at ``dtype``)."""
    return CheckpointError(f"the model's output is not a number (inf or NaN) at {dtype}: its weights or activations "
                           "overflow the arithmetic (weights damaged or wrongly scaled); the translation cannot go on.")


def log_probs(logits: Tensor, decode: DecodeConfig) -> Tensor:
    """Next-token log-probabilities [n, V] from ``logits`` [n, V], with ``<pad>`` and ``<sos>`` never chosen.

    attnviz renormalises over the rest. A configured search scores as transformers does: a log-softmax over the
    model's own vocabulary (an imported model's ``<sos>`` row repeats its decoder start token's, so it is left out),
    and ``<pad>`` banned after it, as its ``bad_words_ids`` ban it."""
    if bool((logits.isnan() | (logits == float("inf"))).any()):
        raise not_a_number(str(logits.dtype)[6:])
    logits = logits.float().clone()
    logits[..., SOS_ID] = NEG_INF
    if not decode.configured:
        logits[..., PAD_ID] = NEG_INF
        return logits.log_softmax(-1)
    logp = logits.log_softmax(-1)
    logp[..., PAD_ID] = NEG_INF
    return logp


def sampling_cut(scores: Tensor, decode: DecodeConfig) -> Tensor:
    """``scores`` [V] (log-probabilities over the temperature) with every token outside the sampling cut-offs at
    -inf, as transformers' ``TopKLogitsWarper`` then ``TopPLogitsWarper`` cut: top-k keeps every token scoring at
    least the k-th best (ties kept); top-p keeps the most probable tokens until their mass reaches p (the token that
    crosses it kept, at least one token always)."""
    if decode.sample_top_k and decode.sample_top_k < scores.size(-1):
        kth = scores.topk(decode.sample_top_k).values[-1]
        scores = scores.masked_fill(scores < kth, NEG_INF)
    if decode.sample_top_p < 1.0:
        ordered, order = scores.sort()  # ascending: the mass below each token, the token itself included
        drop = ordered.softmax(-1).cumsum(-1) <= 1 - decode.sample_top_p
        drop[-1] = False
        scores = scores.masked_fill(drop.scatter(0, order, drop), NEG_INF)
    return scores


def forced_token(t: int, limit: int, decode: DecodeConfig) -> int | None:
    """The token the rules force at step ``t`` of at most ``limit`` (the end token at the last step the limit
    allows, else the first token), or None."""
    if decode.forced_eos >= 0 and t == limit - 1:
        return decode.forced_eos
    if decode.forced_bos >= 0 and t == 0:
        return decode.forced_bos
    return None


def banned_tokens(prefix: Sequence[int], decode: DecodeConfig) -> set[int]:
    """Tokens that may not follow ``prefix`` (output ids so far): each that would repeat an n-gram of
    ``no_repeat_ngram`` tokens (counted from the decoder's start token, as transformers does), and the last token
    of each ``bad_words`` sequence whose other tokens end the prefix (a lone end token is never banned)."""
    seq = [SOS_ID, *prefix]
    banned: set[int] = set()
    n = decode.no_repeat_ngram
    if n and len(seq) + 1 >= n:
        tail = tuple(seq[len(seq) - n + 1:]) if n > 1 else ()
        banned |= {seq[i + n - 1] for i in range(len(seq) - n + 1) if tuple(seq[i:i + n - 1]) == tail}
    for word in decode.bad_words:
        if word == (EOS_ID,):
            continue
        head = word[:-1]
        if not head or (len(head) <= len(seq) and tuple(seq[len(seq) - len(head):]) == head):
            banned.add(word[-1])
    return banned


def constrain(logp: Tensor, prefixes: Sequence[Sequence[int]], t: int, limit: int, decode: DecodeConfig) -> Tensor:
    """``logp`` [n, V] of the hypotheses with ``prefixes`` at step ``t`` of at most ``limit``, with the banned
    tokens at -inf and a forced token holding all the probability (log 0; every other token -inf)."""
    forced = forced_token(t, limit, decode)
    if not (decode.no_repeat_ngram or decode.bad_words or forced is not None):
        return logp
    logp = logp.clone()
    if forced is not None:
        logp[:] = NEG_INF
        logp[:, forced] = 0.0
        return logp
    for row, prefix in enumerate(prefixes):
        banned = banned_tokens(prefix, decode)
        if banned:
            logp[row, sorted(banned)] = NEG_INF
    return logp


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's length penalty ((5 + length) / 6) ** alpha (Wu et al. 2016); 1 when ``alpha`` is 0."""
    return ((5 + length) / 6) ** alpha if alpha else 1.0


def normalised(score: float, length: int, decode: DecodeConfig) -> float:
    """A hypothesis' ranking score: its log-probability ``score`` over the penalty for ``length`` output tokens
    (``<eos>`` included): GNMT's, or transformers' length ** length_penalty."""
    if decode.length_rule == "power":
        return score / length ** decode.length_penalty
    return score / length_penalty(length, decode.length_penalty)


def settled(finished: list[float], best_alive: float, beam: int) -> bool:
    """Whether a sentence's search is over: nothing alive, or ``beam`` finished and none alive ranks higher."""
    return best_alive == NEG_INF or (len(finished) >= beam and max(finished) >= best_alive)


def search_settled(finished: list[float], best_alive: float, t: int, steps: int, decode: DecodeConfig) -> bool:
    """Whether a sentence's beam search is over after step ``t`` (of at most ``steps``): ``finished`` holds the
    normalised scores of its finished hypotheses, ``best_alive`` the best live log-probability.

    attnviz's rule is ``settled``. transformers keeps the ``beam`` best finished and, once it has them, stops at
    once (early_stopping "true"), or when the best live hypothesis normalised at its present length ("false"), or at
    the longest length still allowed ("never", with a positive penalty), ranks no higher than the worst of them."""
    if decode.early_stopping == "attnviz":
        return settled(finished, normalised(best_alive, t + 1, decode), decode.beam)
    best = sorted(finished, reverse=True)[:decode.beam]
    if best_alive == NEG_INF or (len(best) >= decode.beam and decode.early_stopping == "true"):
        return True
    if len(best) < decode.beam:
        return False
    length = steps if decode.early_stopping == "never" and decode.length_penalty > 0 else t + 1
    return normalised(best_alive, length, decode) <= best[-1]


class Candidate(NamedTuple):
    score: float  # total log-probability of the extended hypothesis
    origin: int  # the live hypothesis (row) it extends
    token: int


class Pruned(NamedTuple):
    kept: list[Candidate]  # live after this step, best first
    ended: list[Candidate]  # finished at this step
    dropped: list[Candidate]  # looked at but not kept


def prune(candidates: list[Candidate], beam: int, last: bool) -> Pruned:
    """Split one sentence's candidates (best first) into kept, finished and pruned; ``last``: the step limit."""
    result = Pruned([], [], [])
    for rank, cand in enumerate(candidates):
        if cand.score == NEG_INF:
            break
        if len(result.kept) == beam:
            result.dropped.append(cand)
        elif cand.token == EOS_ID or last:
            (result.ended if rank < beam else result.dropped).append(cand)  # an ending counts among the beam best
        else:
            result.kept.append(cand)
    return result
