"""One teacher-forced translation as the attribution methods read it: token ids, the foil, and a forward pass whose
token embeddings are given (so that gradients can be taken with respect to them).

``forced_ids`` turns the labels of a translation (source tokens with the specials the kind reads; the T output
tokens) into id tensors: the decoder inputs are ``<sos>`` then every output but the last, as ``align`` and
``analysis.contributions`` force them. ``token_tables`` finds a network's token embedding tables and the scale the
network multiplies them by (sqrt(D) in a Transformer that scales, 1 in the LSTM). ``scores`` runs the network with
given embeddings ``x`` (after that scale, before positions are added) and returns, per row, the attributed quantity
at that row's output position: log p(chosen), p(chosen), or its difference with a foil. Names: B rows, S source, T
target, D embedding width, V target vocabulary.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnviz.engine.errors import InputError
from attnviz.engine.text.tokenize import visible_token
from attnviz.engine.text.vocab import PAD, PAD_ID, SOS, SOS_ID

GRADIENT_AT = "token embeddings after the model's embedding scale, before positions are added"


@dataclass(frozen=True)
class Forced:
    """A translation as ids: ``src`` [S] (empty for a language model), ``tgt_in`` [T] and ``tgt_out`` [T]."""

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor


def forced_ids(translator, src_tokens: Sequence[str], tokens: Sequence[str]) -> Forced:
    """The ids of a teacher-forced translation. Source tokens the vocabulary lacks read as ``<unk>`` (as when
    translating); an output token it lacks is refused, since the model could not have produced it."""
    unknown = sorted({t for t in tokens if t not in translator.tgt_vocab})
    if unknown:
        raise InputError(f"Not in the model's output vocabulary: {', '.join(visible_token(t) for t in unknown[:8])}. "
                         "Attribute a translation the model can produce (its own, or words its top-k lists show).")
    model = translator.model
    if len(src_tokens) > model.max_source_len:
        raise InputError(f"The source has {len(src_tokens)} tokens but the model reads at most "
                         f"{model.max_source_len}.")
    if len(tokens) > model.max_target_len:
        raise InputError(f"The translation has {len(tokens)} tokens but the model produces at most "
                         f"{model.max_target_len}.")
    src = torch.tensor(translator.src_vocab.encode(src_tokens), dtype=torch.long)
    tgt_in = torch.tensor(translator.tgt_vocab.encode([SOS, *tokens[:-1]]), dtype=torch.long)
    tgt_out = torch.tensor(translator.tgt_vocab.encode(tokens), dtype=torch.long)
    return Forced(src, tgt_in, tgt_out)


def foil_id(translator, text: str) -> int:
    """The id of a contrastive foil: one output token, named as the vocabulary spells it or as the target tokenizer
    reads ``text``; InputError when it is unknown or more than one token."""
    vocab = translator.tgt_vocab
    if text in vocab and text != PAD:
        return vocab.id(text)
    pieces = translator.tgt_spec.tokenize(text)
    if len(pieces) == 1 and pieces[0] in vocab:
        return vocab.id(pieces[0])
    if len(pieces) > 1:
        shown = ", ".join(visible_token(p) for p in pieces)
        raise InputError(f"The foil {text!r} is {len(pieces)} tokens for this model ({shown}); a foil is one output "
                         "token: give one of them.")
    raise InputError(f"The foil {text!r} is not in the model's output vocabulary; choose one output token it knows "
                     "(its top-k lists show some).")


@dataclass(frozen=True)
class Table:
    module: nn.Embedding
    scale: float  # what the network multiplies a looked-up vector by before adding its position


def token_tables(model) -> tuple[Table | None, Table]:
    """(source table or None for a language model, target table) of a network: the ``nn.Embedding`` itself
    (``src_embed``, the LSTM's) or inside an embedding layer (``src_embed.tokens``, the Transformer's)."""

    def find(name: str) -> Table | None:
        embed = getattr(model, name, None)
        table = getattr(embed, "tokens", embed)
        if not isinstance(table, nn.Embedding):
            return None
        return Table(table, float(getattr(embed, "scale", 1.0)))

    src, tgt = (find("src_embed") if model.has_source else None), find("tgt_embed")
    if tgt is None or (model.has_source and src is None):
        raise InputError("This network exposes no token embedding table, so gradients cannot reach its inputs.")
    return src, tgt


@contextmanager
def embeddings_given(model, src_x: Tensor | None, tgt_x: Tensor) -> Iterator[None]:
    """Within the block the network's token tables return ``src_x`` [B, S, D] and ``tgt_x`` [B, T, D] (given after
    the embedding scale, so divided by it here) instead of looking the ids up, in this thread only. A table called
    twice (one module for both sides) returns them in the order the network reads them: the source first."""
    src, tgt = token_tables(model)
    given: dict[int, list[Tensor]] = {}
    for table, x in ((src, src_x), (tgt, tgt_x)):
        if table is not None and x is not None:
            given.setdefault(id(table.module), []).append(x / table.scale)
    modules = {id(t.module): t.module for t in (src, tgt) if t is not None}
    mine = threading.get_ident()  # another thread decoding with the same model meanwhile looks its ids up

    def returning(queue: list[Tensor]):
        return lambda module, inputs, output: queue.pop(0) if threading.get_ident() == mine else None

    hooks = [modules[key].register_forward_hook(returning(queue)) for key, queue in given.items()]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()


def embedded(model, forced: Forced) -> tuple[Tensor | None, Tensor]:
    """The token embeddings after the scale: source [S, D] (None for a language model) and decoder inputs [T, D]."""
    src, tgt = token_tables(model)
    device = tgt.module.weight.device
    with torch.no_grad():
        src_x = None if src is None else src.module(forced.src.to(device)) * src.scale
        tgt_x = tgt.module(forced.tgt_in.to(device)) * tgt.scale
    return src_x, tgt_x


def scores(model, forced: Forced, src_x: Tensor | None, tgt_x: Tensor, positions: Tensor, foil: int | None,
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
    """Log-probabilities [..., V] as decoding reports them (``search.greedy.allowed_logits``: ``<pad>`` and ``<sos>``
    ruled out), in the logits' own precision, so float64 tests compare exactly."""
    ruled_out = torch.zeros(logits.size(-1), dtype=torch.bool, device=logits.device)
    ruled_out[[PAD_ID, SOS_ID]] = True
    return logits.masked_fill(ruled_out, float("-inf")).log_softmax(-1)


def quantity(foil: str | None, probability: bool) -> str:
    """The attributed quantity in words, as results and outputs state it."""
    one = "p({})" if probability else "log p({})"
    return one.format("chosen") + (f" - {one.format(repr(foil))}" if foil is not None else "")
