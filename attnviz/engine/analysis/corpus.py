"""Teacher-forced attention over a corpus, in padded length-sorted batches: what head statistics and alignment read.

A corpus is a list of ``Example``s (source ids with ``<sos>``/``<eos>``, target ids with them too). The targets
are the references, a given target file (forced decoding), or the model's own greedy outputs (``greedy_targets``,
batched). ``attention_batches`` runs each batch once with ``need_weights`` and yields ``Batch``es holding every
attention kind as one tensor [B, L, H, Tq, Tk] with query and key masks. Decoder queries are the decoder inputs
``<sos> y1 .. yn`` (query i predicts output i: y(i+1), and ``<eos>`` after the last word). Names: B batch, L
layers, H heads, S source length, T target length.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from attnviz.engine.corpus.batching import pad_batch
from attnviz.engine.errors import InputError
from attnviz.engine.models.protocol import SearchModel
from attnviz.engine.search.torch_batch import device_of, greedy_batch
from attnviz.engine.text.vocab import EOS_ID, PAD_ID, SOS_ID

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator


@dataclass(frozen=True)
class Example:
    """One sentence pair as ids, each side with ``<sos>`` and ``<eos>`` (a language model's source is empty)."""

    src: tuple[int, ...]
    tgt: tuple[int, ...]


@dataclass
class Batch:
    """Attention of a batch of examples, teacher-forced: per kind [B, L, H, Tq, Tk] with masks."""

    index: list[int]  # positions of these examples in the corpus
    src: Tensor  # [B, S] source ids (pad = PAD_ID)
    tgt_in: Tensor  # [B, T] decoder inputs: <sos> y1 .. yn (pad = PAD_ID)
    attention: dict[str, Tensor]  # kind -> [B, L, H, Tq, Tk]

    def queries(self, kind: str) -> Tensor:
        """[B, Tq] True at real query positions of ``kind``."""
        return (self.src if kind == "encoder" else self.tgt_in) != PAD_ID

    def keys(self, kind: str) -> Tensor:
        """[B, Tk] ids of the keys of ``kind`` (pad where there is no key)."""
        return self.tgt_in if kind == "decoder" else self.src


def encode_corpus(translator: Translator, sources: Sequence[str], targets: Sequence[str] | None) -> list[Example]:
    """Tokenize a corpus with the translator's tokenizers; ``targets`` None leaves targets empty (to be decoded).

    Sources and targets are cut to what the model reads; an empty source raises ``InputError`` naming its line.
    """
    limit = translator.model.max_target_len - 1
    examples = []
    for number, text in enumerate(sources, 1):
        if translator.has_source:
            try:
                src = tuple(translator.prepare_source(text)[1])
            except InputError as exc:
                raise InputError(f"sentence {number}: {exc}") from None
        else:
            src = ()
        tgt: tuple[int, ...] = ()
        if targets is not None:
            words = translator.reference_tokens(targets[number - 1])[: limit - 1]
            tgt = tuple(translator.tgt_vocab.encode(words, add_sos_eos=True))
        examples.append(Example(src, tgt))
    return examples


def batch_order(examples: Sequence[Example], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar source (then target) length, little padding."""
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i].src), len(examples[i].tgt)))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


@torch.inference_mode()
def greedy_targets(model: SearchModel, examples: Sequence[Example], batch_size: int = 128,
                   max_len: int = 50) -> list[Example]:
    """The examples with the model's own greedy outputs as targets (batched search)."""
    out = list(examples)
    for chunk in batch_order(examples, batch_size):
        ids = greedy_batch(model, pad_batch([examples[i].src for i in chunk]), max_len)
        for i, hyp in zip(chunk, ids, strict=True):
            hyp = hyp[: model.max_target_len - 2]
            out[i] = Example(examples[i].src, (SOS_ID, *hyp, EOS_ID))
    return out


def _stack(weights: list[Tensor]) -> Tensor:
    return torch.stack(weights, dim=1).float()  # L x [B, H, Tq, Tk] -> [B, L, H, Tq, Tk]


@torch.inference_mode()
def forward_batch(model: SearchModel, src: Tensor, tgt_in: Tensor, kinds: Sequence[str]) -> dict[str, Tensor]:
    """One teacher-forced pass with weights: kind -> [B, L, H, Tq, Tk] for every kind in ``kinds``."""
    device = device_of(model)
    enc = model.encode(src.to(device), need_weights=True)
    dec = model.decode(tgt_in.to(device), enc, need_weights=True)
    found = {"encoder": enc.attention, "decoder": dec.self_attention, "cross": dec.cross_attention}
    return {kind: _stack(found[kind]).cpu() for kind in kinds if found[kind]}


def attention_batches(model: SearchModel, examples: Sequence[Example], kinds: Sequence[str], batch_size: int = 64
                      ) -> Iterator[Batch]:
    """Teacher-forced attention of every example, batch by batch (targets must be filled in)."""
    model.eval()
    for chunk in batch_order(examples, batch_size):
        src = pad_batch([examples[i].src or (PAD_ID,) for i in chunk])
        if not any(examples[i].src for i in chunk):
            src = src[:, :0]  # a language model reads no source: [B, 0]
        tgt_in = pad_batch([examples[i].tgt[:-1] for i in chunk])  # drop <eos>: [B, T]
        yield Batch(chunk, src, tgt_in, forward_batch(model, src, tgt_in, kinds))
