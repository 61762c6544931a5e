"""The attention of an output chosen by any search, captured by re-scoring it teacher-forced.

Beam search keeps no per-step attention (it would hold beam x layers x heads maps for hypotheses that are then
dropped), and ``attnviz translate --beam 5 --attention`` used to decode greedily instead, printing a different
translation because an output option was added. Here the batched search chooses the tokens (greedy or beam, the
very call used without ``--attention``), and one teacher-forced pass over those tokens records every attention
matrix: the translation printed is the search's, and its maps are the ones that produced it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from attnviz.engine.config import DecodeConfig
from attnviz.engine.decoding import DecodeInput, decode_steps, step_limit
from attnviz.engine.errors import InputError
from attnviz.engine.events import DecodeStep, Translation, assemble
from attnviz.engine.vocab import EOS_ID


def forced_translation(translator, text: str, tokens: Sequence[str], ended: bool, topk: int = 10) -> Translation:
    """``text`` translated as ``tokens`` (no specials; ``ended``: the search closed with ``<eos>``), with the
    attention, probabilities and top-k the model gives each of those tokens."""
    labels, src_ids, warnings = translator.prepare_source(text)
    forced = translator.tgt_vocab.encode(tokens) + ([EOS_ID] if ended else [])
    events = list(decode_steps(translator.model, DecodeInput(src_ids, labels, forced, warnings), translator.tgt_vocab,
                               DecodeConfig(max_len=max(len(forced), 1), topk=topk)))
    steps = [e for e in events if isinstance(e, DecodeStep)][: len(forced)]
    steps = [replace(s, forced=False) for s in steps]  # chosen by the search, not typed by the user
    return assemble(events[0], steps, translator.detokenize(list(tokens)))


def search_translations(translator, texts: Sequence[str], decode: DecodeConfig) -> list[Translation | None]:
    """Each text translated by ``decode``'s search (None for an empty one), with its attention."""
    token_lists = translator.translate_batch_tokens(texts, decode)
    limit = step_limit(translator.model, decode.max_len)
    results: list[Translation | None] = []
    for text, tokens in zip(texts, token_lists):
        try:
            # a search that stops before its step limit stopped at <eos> (it never returns <eos> itself)
            results.append(forced_translation(translator, text, tokens, ended=len(tokens) < limit))
        except InputError:
            results.append(None)
    return results
