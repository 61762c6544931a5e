"""Beam search of one input as events with every attention map (``beam_steps``). The batched search for corpora
(``engine.search.torch_batch.beam_batch``, the loop of ``engine.search.batch``) ranks with the same rules
(``prune``, ``settled``), so both choose the same translation.

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
from attnviz.engine.search.greedy import DecodeInput
from attnviz.engine.search.head_mask import heads_off
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
from attnviz.engine.search.torch_batch import device_of, extensions, step_limit
from attnviz.engine.text.vocab import EOS_ID, SOS_ID, Vocab

NEG_INF = float("-inf")


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
            split = prune(extensions(scores, constrain(logp, prefixes, t, steps, decode), 2 * beam), beam,
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
