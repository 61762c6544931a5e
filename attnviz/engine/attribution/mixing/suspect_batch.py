"""The suspect-translation components of many sentences at once: greedy outputs decoded in batches, then one
teacher-forced pass per batch that gives the log-probabilities of the chosen tokens, the cross-attention and (where
the kind has it) ALTI+, so a corpus costs a few batched passes instead of a decode per sentence. Names: B batch, L
layers, H heads, S source, T target.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from attnviz.engine.analysis.corpus import Example, batch_order, encode_corpus, greedy_targets
from attnviz.engine.attribution.mixing.alti import alti_maps, layer_contributions
from attnviz.engine.attribution.mixing.capture import capture
from attnviz.engine.attribution.suspect import component_values
from attnviz.engine.corpus.batching import pad_batch
from attnviz.engine.search.greedy import device_of


def decoded(translator, sources: Sequence[str], batch_size: int = 64) -> list[Example]:
    """The sources with the model's greedy outputs as targets (``<sos>`` .. ``<eos>``)."""
    with torch.inference_mode():
        return greedy_targets(translator.model, encode_corpus(translator, sources, None), batch_size)


@torch.inference_mode()
def batch_components(translator, examples: Sequence[Example], with_alti: bool
                     ) -> Iterator[tuple[int, str, dict[str, float]]]:
    """(index in ``examples``, output text, components) of every example, batch by batch (in length order)."""
    model, device = translator.model, device_of(translator.model)
    for chunk in batch_order(examples, 32):
        src = pad_batch([examples[i].src for i in chunk]).to(device)
        tgt = pad_batch([examples[i].tgt for i in chunk]).to(device)  # <sos> y1 .. yn <eos>
        cap = capture(model, src, tgt[:, :-1])
        logp = model.project(cap.hidden).float().log_softmax(-1).gather(-1, tgt[:, 1:, None])[..., 0]  # [B, T]
        cross = cap.blocks["cross"][-1].weights.float().mean(1).cpu().numpy()  # last layer, heads averaged
        per = {k: v.double().cpu().numpy() for k, v in layer_contributions(cap).items()} if with_alti else None
        for b, i in enumerate(chunk):
            s, t = len(examples[i].src), len(examples[i].tgt) - 1
            share = alti_maps(cap, (s, t), b, per).source_share if per is not None else None
            tokens = translator.tgt_vocab.decode(examples[i].tgt)
            labels = [translator.src_vocab.token(j) for j in examples[i].src]
            found = component_values(logp[b, :t].double().cpu().numpy(), cross[b, :t, :s], labels, share)
            yield i, translator.detokenize(tokens), found

