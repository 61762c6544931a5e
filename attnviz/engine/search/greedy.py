"""Search: step-by-step decoding of one input (greedy or sampled) as a generator of events (beam search is in
``engine.search.beam``, batched search in ``engine.search.torch_batch``).

Every function drives a model through the incremental protocol (``encode``, ``start``, ``step``), so any model kind
that implements it (Transformer, RNN, language model) decodes here without special cases. Heads that
``DecodeConfig.heads_off`` names are switched off around every model call (``engine.search.head_mask``).
``recompute=True`` decodes the whole prefix again at every step instead of using the cache: the slow reference
that tests and benchmarks compare against.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import DecodeStep, EncoderPass
from attnviz.engine.models.protocol import Encoded, SearchModel
from attnviz.engine.search.capture import capture_dtype, encoder_maps, on_host
from attnviz.engine.search.head_mask import heads_off
from attnviz.engine.search.rules import constrain, forced_token, log_probs, sampling_cut
from attnviz.engine.search.torch_batch import device_of, step_limit
from attnviz.engine.text.vocab import EOS_ID, SOS_ID, Vocab


class DecodeInput(NamedTuple):
    """One input ready for step-by-step decoding."""

    src_ids: Sequence[int]  # what the model reads, with <sos>/<eos>; empty for a language model
    src_tokens: Sequence[str]  # labels of ``src_ids``, one to one (but the last: see ModelKind.reads_prompt)
    forced: Sequence[int] = ()  # target ids the first steps take instead of choosing (a language model's prefix)
    warnings: Sequence[str] = ()  # about the input (tokens dropped, unknown words)
    roles: Sequence[str] = ()  # an LLM's prompt: each source token's role (``EncoderPass.roles``)


def _recomputed_step(model: SearchModel, prefix: list[int], enc: Encoded,
                     need_weights: bool) -> tuple[Tensor, Tensor | None, Tensor | None]:
    out = model.decode(torch.tensor([prefix], device=device_of(model)), enc, need_weights)
    logits = model.project(out.hidden[:, -1])
    if not need_weights:
        return logits, None, None
    self_rows, cross_rows = out.last_rows()
    return logits, self_rows, cross_rows


def _choose(logp: Tensor, decode: DecodeConfig, generator: torch.Generator | None) -> int:
    """Greedy (``decode.temperature`` 0) or a draw from softmax(logp / temperature) (the same as from the logits),
    within the top-k / top-p cut-offs (``rules.sampling_cut``)."""
    if decode.temperature <= 0:
        return int(logp.argmax())
    scores = sampling_cut(logp / decode.temperature, decode)
    return int(torch.multinomial(scores.softmax(-1).cpu(), 1, generator=generator))


@torch.inference_mode()
def decode_steps(model: SearchModel, source: DecodeInput, tgt_vocab: Vocab, decode: DecodeConfig,
                 recompute: bool = False,
                 generator: torch.Generator | None = None) -> Iterator[EncoderPass | DecodeStep]:
    """Decode one input, yielding an ``EncoderPass`` and then one ``DecodeStep`` per token.

    The first steps take ``source.forced`` (their steps say ``forced`` and report what the model would have
    predicted); then each token is the most probable one (``decode.temperature`` 0) or drawn from the softmax at
    that temperature with ``generator``. At most ``decode.max_len`` tokens; ``decode.topk`` candidates per step.
    """
    model.eval()
    device = device_of(model)
    src_ids, forced = list(source.src_ids), list(source.forced)
    gates = lambda: heads_off(model, decode.heads_off, decode.rescale_heads)  # noqa: E731 (around model calls)
    with gates():
        enc = model.encode(torch.tensor([src_ids], dtype=torch.long, device=device), need_weights=True)
        cache = model.start(enc)
    # L x [1,H,S,S] -> [L,H,S,S]
    kept = capture_dtype(model)
    yield EncoderPass(tuple(source.src_tokens), encoder_maps(enc.attention, kept), tuple(source.warnings),
                      tuple(source.roles))
    prefix, k, limit = [SOS_ID], min(decode.topk, len(tgt_vocab)), step_limit(model, decode.max_len)
    for t in range(limit):
        with gates():
            if recompute:
                logits, self_rows, cross_rows = _recomputed_step(model, prefix, enc, True)
            else:
                logits, self_rows, cross_rows = model.step(torch.tensor([prefix[-1]], device=device), cache, True)
        logp = log_probs(logits, decode)[0].cpu()  # from a GPU, once: the step's figures are read on the CPU
        probs = logp.exp()
        top_p, top_i = probs.topk(k)
        ruled = forced_token(t, limit, decode)
        is_forced = t < len(forced) or ruled is not None  # given (typed, or by the model's rules), not chosen
        if t < len(forced):
            token_id = int(forced[t])
        else:
            token_id = _choose(constrain(logp[None], [prefix[1:]], t, limit, decode)[0], decode, generator)
        yield DecodeStep(
            index=t,
            token=tgt_vocab.token(token_id),
            token_id=token_id,
            probability=float(probs[token_id]),
            topk=tuple((tgt_vocab.token(int(i)), float(p)) for p, i in zip(top_p, top_i)),
            entropy=float(-(probs * logp).nan_to_num().sum()),
            self_attention=None if self_rows is None else on_host(self_rows[0], kept),
            cross_attention=None if cross_rows is None else on_host(cross_rows[0], kept),
            src_len=enc.mask.size(-1),  # the source positions attended to
            forced=is_forced,
        )
        if token_id == EOS_ID:
            return
        prefix.append(token_id)
