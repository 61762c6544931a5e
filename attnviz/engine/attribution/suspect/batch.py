"""The suspect-translation components of many sentences at once: greedy outputs decoded in batches, then one
teacher-forced pass per batch that gives the log-probabilities of the chosen tokens, the cross-attention and (where
the kind has it) ALTI+, so a corpus costs a few batched passes instead of a decode per sentence. Names: B batch, L
layers, H heads, S source, T target.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from attnviz.engine.analysis.corpus import Example, batch_order, encode_corpus
from attnviz.engine.attribution.mixing.alti import alti_maps, layer_contributions
from attnviz.engine.attribution.mixing.capture import Capture, capture
from attnviz.engine.attribution.suspect.components import component_values
from attnviz.engine.corpus.batching import pad_batch
from attnviz.engine.search.torch_batch import allowed_logits, device_of, greedy_batch, step_limit
from attnviz.engine.text.vocab import EOS_ID, SOS_ID
from attnviz.engine.translator import GREEDY

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator


def decoded(translator: Translator, sources: Sequence[str], batch_size: int = 64) -> Iterator[int | list[Example]]:
    """Sentences decoded after each batch, then the examples with the model's greedy outputs as targets:
    ``<sos>``, the tokens, and ``<eos>`` where the model chose it (a decode cut at the step limit has none), as
    ``Translator.translate`` decodes one."""
    model = translator.model
    examples = encode_corpus(translator, sources, None)
    limit, out, done = step_limit(model, GREEDY.max_len), list(examples), 0
    for chunk in batch_order(examples, batch_size):
        with torch.inference_mode():
            ids = greedy_batch(model, pad_batch([examples[i].src for i in chunk]), GREEDY.max_len)
        for i, hyp in zip(chunk, ids, strict=True):
            out[i] = Example(examples[i].src, (SOS_ID, *hyp, *((EOS_ID,) if len(hyp) < limit else ())))
        done += len(chunk)
        yield done
    yield out


def _pass(translator: Translator, src: Tensor, tgt_in: Tensor, with_alti: bool
          ) -> tuple[Tensor, Tensor, Capture | None]:
    """Decoder output [B, T, D], the last layer's cross-attention [B, H, T, S] (an LLM's rows over its prompt) and
    (ALTI+) the captured blocks."""
    model = translator.model
    if with_alti:
        cap = capture(model, src, tgt_in)
        return cap.hidden, cap.cross, cap
    dec = model.decode(tgt_in, model.encode(src, need_weights=True), need_weights=True)
    return dec.hidden, dec.cross_attention[-1], None


def _shares(cap: Capture) -> Callable[[int, int, int, tuple[int, int] | None], np.ndarray]:
    """share(b, S, T, span): sentence b's ALTI+ source share per output token (an LLM: its span's), from the
    batch's contributions computed once."""
    per = layer_contributions(cap)
    return lambda b, s, t, span: alti_maps(cap, (s, t), b, per).span_share(span)


@torch.inference_mode()
def batch_components(translator: Translator, examples: Sequence[Example], with_alti: bool,
                     spans: Sequence[tuple[int, int] | None] | None = None
                     ) -> Iterator[tuple[int, str, dict[str, float]]]:
    """(index in ``examples``, output text, components) of every example, batch by batch (in length order);
    ``spans`` each LLM prompt's sentence span (``suspect.component_values``)."""
    model, device = translator.model, device_of(translator.model)
    model.eval()
    for chunk in batch_order(examples, 32):
        src = pad_batch([examples[i].src for i in chunk]).to(device)
        tgt = pad_batch([examples[i].tgt for i in chunk]).to(device)  # <sos> y1 .. yn (<eos>)
        hidden, cross_w, cap = _pass(translator, src, tgt[:, :-1], with_alti)
        logits = allowed_logits(model.project(hidden))  # as the search reads them: <pad>, <sos> ruled out
        logp = logits.log_softmax(-1).gather(-1, tgt[:, 1:, None])[..., 0]  # [B, T]
        cross = cross_w.float().mean(1).cpu().numpy()  # heads averaged: [B, T, S]
        share_of = _shares(cap) if cap is not None else None
        for b, i in enumerate(chunk):
            # an LLM's prompt: its last token is the first decoder input, not a column
            s, t = len(examples[i].src) - translator.kind.reads_prompt, len(examples[i].tgt) - 1
            span = spans[i] if spans is not None else None
            share = share_of(b, s, t, span) if share_of is not None else None
            tokens = translator.tgt_vocab.decode(examples[i].tgt)
            labels = [translator.src_vocab.token(j) for j in examples[i].src[:s]]
            found = component_values(logp[b, :t].double().cpu().numpy(), cross[b, :t, :s], labels, share,
                                     tokens, span)
            yield i, translator.detokenize(tokens), found
