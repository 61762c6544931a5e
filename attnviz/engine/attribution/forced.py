"""One teacher-forced translation as the attribution methods read it: token ids, the foil, and a forward pass whose
token embeddings are given (so that gradients can be taken with respect to them).

``forced_ids`` turns the labels of a translation (source tokens with the specials the kind reads; the T output
tokens) into id tensors: the decoder inputs are ``<sos>`` then every output but the last, as ``align`` and
``analysis.contributions`` force them. ``embedded`` reads the token embeddings at the network's ``embed.src`` and
``embed.tgt`` probe points (after the embedding scale: sqrt(D) in a Transformer that scales, 1 in the LSTM).
``scores`` runs the network with given embeddings ``x`` there (an edit of those points) and returns, per row, the
attributed quantity at that row's output position: log p(chosen), p(chosen), or its difference with a foil. Names: B
rows, S source, T target, D embedding width, V target vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from attnviz.engine.errors import InputError, cut, quoted
from attnviz.engine.models.probes import capture, edit
from attnviz.engine.models.protocol import SearchModel
from attnviz.engine.text.tokenize import visible_token
from attnviz.engine.text.vocab import PAD, PAD_ID, SOS, SOS_ID

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

GRADIENT_AT = "token embeddings after the model's embedding scale, before positions are added"


@dataclass(frozen=True)
class Forced:
    """A translation as ids: ``src`` [S] (empty for a language model), ``tgt_in`` [T] and ``tgt_out`` [T]."""

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor


def forced_ids(translator: Translator, src_tokens: Sequence[str], tokens: Sequence[str]) -> Forced:
    """The ids of a teacher-forced translation. Source tokens the vocabulary lacks read as ``<unk>`` (as when
    translating); an output token it lacks is refused, since the model could not have produced it."""
    unknown = sorted({t for t in tokens if t not in translator.tgt_vocab})
    if unknown:
        listed = ", ".join(cut(visible_token(t)) for t in unknown[:8])
        raise InputError(f"Not in the model's output vocabulary: {listed}. "
                         "Attribute a translation the model can produce (its own, or words its top-k lists show).")
    model = translator.model
    if len(src_tokens) > model.max_source_len:
        raise InputError(f"The source has {len(src_tokens)} tokens but the model reads at most "
                         f"{model.max_source_len}.")
    if len(tokens) > model.max_target_len:
        raise InputError(f"The translation has {len(tokens)} tokens but the model produces at most "
                         f"{model.max_target_len}.")
    src = torch.tensor(translator.source_ids(src_tokens), dtype=torch.long)
    tgt_in = torch.tensor(translator.tgt_vocab.encode([SOS, *tokens[:-1]]), dtype=torch.long)
    tgt_out = torch.tensor(translator.tgt_vocab.encode(tokens), dtype=torch.long)
    return Forced(src, tgt_in, tgt_out)


def foil_id(translator: Translator, text: str) -> int:
    """The id of a contrastive foil: one output token, named as the vocabulary spells it or as the target tokenizer
    reads ``text``; InputError when it is unknown or more than one token."""
    vocab = translator.tgt_vocab
    if text in vocab and text != PAD:
        return vocab.id(text)
    pieces = translator.reference_tokens(text)
    if len(pieces) == 1 and pieces[0] in vocab:
        return vocab.id(pieces[0])
    if len(pieces) > 1:
        shown = ", ".join(visible_token(p) for p in pieces[:6]) + (", ..." if len(pieces) > 6 else "")
        raise InputError(f"The foil {quoted(text)} is {len(pieces)} tokens for this model ({shown}); a foil is one "
                         "output token: give one of them.")
    raise InputError(f"The foil {quoted(text)} is not in the model's output vocabulary; choose one output token it "
                     "knows (its top-k lists show some).")


def _sides(model: SearchModel) -> list[str]:
    return ["embed.src", "embed.tgt"] if model.has_source else ["embed.tgt"]


@contextmanager
def embeddings_given(model: SearchModel, src_x: Tensor | None, tgt_x: Tensor) -> Iterator[None]:
    """Within the block the network reads ``src_x`` [B, S, D] and ``tgt_x`` [B, T, D] at its ``embed.src`` and
    ``embed.tgt`` probe points (after the embedding scale, before positions) instead of looking the ids up, in this
    thread only."""
    given = {"embed.tgt": tgt_x} | ({"embed.src": src_x} if model.has_source and src_x is not None else {})
    with edit(model, {name: _replaced_by(x) for name, x in given.items()}):
        yield


def _replaced_by(x: Tensor) -> Callable[[Tensor], Tensor]:
    def replace(value: Tensor) -> Tensor:
        if value.shape != x.shape:
            raise InputError(f"The given embeddings have shape {list(x.shape)}, but the network reads "
                             f"{list(value.shape)} there.")
        return x

    return replace


def embedded(model: SearchModel, forced: Forced) -> tuple[Tensor | None, Tensor]:
    """The token embeddings after the scale: source [S, D] (None for a language model) and decoder inputs [T, D],
    read at the network's ``embed.src`` / ``embed.tgt`` probe points in one pass."""
    device = next(model.parameters()).device
    with torch.no_grad(), capture(model, _sides(model)) as seen:
        model.decode(forced.tgt_in[None].to(device), model.encode(forced.src[None].to(device)))
    return (seen["embed.src"][0] if model.has_source else None), seen["embed.tgt"][0]


def scores(model: SearchModel, forced: Forced, src_x: Tensor | None, tgt_x: Tensor, positions: Tensor, foil: int | None,
           probability: bool) -> Tensor:
    """The attributed quantity of each row [B]: the network run on embeddings ``src_x`` [B, S, D] and ``tgt_x``
    [B, T, D], read at output position ``positions[b]``: log p(chosen) (or p(chosen) when ``probability``), minus
    the same of ``foil`` when there is one."""
    b = tgt_x.size(0)
    src_ids = forced.src.expand(b, -1).to(tgt_x.device)  # [S] -> [B, S]; ids only mark padding, values are given
    tgt_ids = forced.tgt_in.expand(b, -1).to(tgt_x.device)
    with embeddings_given(model, src_x, tgt_x):
        hidden = model.decode(tgt_ids, model.encode(src_ids)).hidden  # [B, T, D]
    rows = torch.arange(b, device=hidden.device)
    logp = next_token_logp(model.project(hidden[rows, positions]))  # [B, D] -> [B, V]: each row's own position
    chosen = forced.tgt_out.to(hidden.device)[positions]  # [B]
    value = logp[rows, chosen]
    if probability:
        value = value.exp()
    if foil is not None:
        other = logp[:, foil]
        value = value - (other.exp() if probability else other)
    return value


def next_token_logp(logits: Tensor) -> Tensor:
    """Log-probabilities [..., V] as decoding reports them (``search.torch_batch.allowed_logits``: ``<pad>`` and
    ``<sos>`` ruled out), in the logits' own precision (so float64 tests compare exactly), but at least float32: a
    half-precision model's softmax over a large vocabulary is taken in float32, as decoding takes it."""
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    ruled_out = torch.zeros(logits.size(-1), dtype=torch.bool, device=logits.device)
    ruled_out[[PAD_ID, SOS_ID]] = True
    return logits.masked_fill(ruled_out, float("-inf")).log_softmax(-1)


def quantity(foil: str | None, probability: bool) -> str:
    """The attributed quantity in words, as results and outputs state it."""
    one = "p({})" if probability else "log p({})"
    return one.format("chosen") + (f" - {one.format(repr(foil))}" if foil is not None else "")
