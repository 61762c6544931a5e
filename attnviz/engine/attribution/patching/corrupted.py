"""The corrupted source of activation patching, resolved against one model: ids the length of the clean source.

``corrupted_source`` reads a ``Corruption`` (``attribution.corruption``) with the model's source vocabulary and
tokenizer: the default replaces every source token but ``<sos>``, ``<eos>`` and language tags by ``<unk>``; an edit
replaces one token (named by its 1-based position or by itself) by one source token; a sentence is tokenized as
translating would (``Translator.prepare_source``) and must give as many tokens as the clean source. Every refusal
is an ``InputError`` that says what was given, what the source holds and what to give instead. Names: S source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from attnviz.engine.analysis.names import is_language_tag
from attnviz.engine.attribution.corruption import DEFAULT, Corruption
from attnviz.engine.errors import InputError, cut
from attnviz.engine.text.tokenize import visible_token
from attnviz.engine.text.vocab import EOS, PAD, SOS, SPECIALS, UNK

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

KEPT = (SOS, EOS, PAD)  # the default corruption leaves these (and language tags) as they are
SHOWN = 12  # tokens a message lists


@dataclass(frozen=True)
class CorruptedSource:
    """The corrupted run's source: ``ids`` [S], its ``tokens`` (labels as the model reads them), what was done in
    words (``said``) and what a reader must know (``notes``)."""

    ids: Tensor
    tokens: tuple[str, ...]
    said: str
    notes: tuple[str, ...] = ()


def numbered(tokens: Sequence[str]) -> str:
    """``1 <sos>, 2 Ein, 3 Hund, ...`` for a message (the first ``SHOWN``)."""
    listed = ", ".join(f"{i + 1} {cut(visible_token(t))}" for i, t in enumerate(tokens[:SHOWN]))
    return listed + (", ..." if len(tokens) > SHOWN else "")


def corrupted_source(translator: Translator, src_tokens: Sequence[str], corruption: Corruption,
                     roles: Sequence[str] = ()) -> CorruptedSource:
    """The corrupted source for the clean ``src_tokens`` (labels with the specials the kind reads); ``roles``, an
    LLM prompt's, give its default corruption: the sentence's span (see ``prompt_default``)."""
    if corruption.sentence is not None:
        return _sentence(translator, src_tokens, corruption.sentence)
    if corruption.which is not None and corruption.word is not None:
        return _edit(translator, src_tokens, corruption.which, corruption.word)
    if translator.kind.reads_prompt:
        return prompt_default(translator, src_tokens, roles)
    tokens = tuple(t if t in KEPT or is_language_tag(t) else UNK for t in src_tokens)
    return _made(translator, tokens, DEFAULT, ())


def prompt_default(translator: Translator, src_tokens: Sequence[str], roles: Sequence[str]) -> CorruptedSource:
    """An LLM prompt's default corruption: every token of the sentence's span (role "source") replaced by the
    folder's first ordinary token (no special: "!" in Qwen's and Llama's vocabularies; an LLM has no <unk> of its
    own), the chat template and the instruction kept, so that only what is to be translated is taken away and the
    prompt keeps its length and its shape."""
    if len(roles) != len(src_tokens):
        raise InputError("Activation patching of a prompt corrupts the sentence's span by default, which needs the "
                         "prompt's roles (Translation.roles); give them, or a corruption (WHICH=WORD or a sentence).")
    filler = _first_ordinary(translator)
    tokens = tuple(filler if role == "source" else t for t, role in zip(src_tokens, roles))
    said = f"every token of the sentence's span replaced by the folder's first ordinary token {filler!r}"
    return _made(translator, tokens, said, ())


def _first_ordinary(translator: Translator) -> str:
    """The folder's first token that is no special (``<...>``, ``<|...|>``), as its vocabulary labels it."""
    vocab = translator.tgt_vocab
    for i in range(len(SPECIALS), len(vocab)):
        token = vocab.token(i)
        if not (token.startswith("<") and token.endswith(">")) and token.strip():
            return token
    raise InputError("The folder's vocabulary holds only special tokens: give a corruption (WHICH=WORD).")


def _made(translator: Translator, tokens: Sequence[str], said: str, notes: tuple[str, ...]) -> CorruptedSource:
    ids = torch.tensor(translator.source_ids(tokens), dtype=torch.long)
    return CorruptedSource(ids, tuple(tokens), said, notes)


def _sentence(translator: Translator, src_tokens: Sequence[str], sentence: str) -> CorruptedSource:
    labels = list(translator.prepare(sentence).src_tokens)
    if len(labels) != len(src_tokens):
        raise InputError(f"The corrupted sentence reads as {len(labels)} tokens ({numbered(labels)}) but the source "
                         f"as {len(src_tokens)} ({numbered(src_tokens)}); activation patching compares the two runs "
                         f"position by position: give a sentence of {len(src_tokens)} tokens, or edit one token "
                         "(WHICH=WORD, e.g. 2=WORD).")
    same = [i for i, (a, b) in enumerate(zip(labels, src_tokens)) if a != b]
    notes = () if same else ("The corrupted sentence reads as the same tokens as the source: nothing is corrupted.",)
    return _made(translator, labels, f"the sentence {sentence!r}", notes)


def _position(src_tokens: Sequence[str], which: str) -> int:
    """The 0-based index of the edited token: a 1-based position, or a token that occurs once."""
    s = len(src_tokens)
    if which.isdecimal():
        if not 1 <= int(which) <= s:
            raise InputError(f"The edit names source position {which}, but the source has {s} tokens "
                             f"({numbered(src_tokens)}): give a position from 1 to {s}.")
        return int(which) - 1
    found = [i for i, t in enumerate(src_tokens) if t == which]
    if len(found) == 1:
        return found[0]
    if not found:
        raise InputError(f"The edit names the source token {which!r}, which the source does not hold "
                         f"({numbered(src_tokens)}): name a token as the model reads it, or its position.")
    raise InputError(f"The source token {which!r} occurs {len(found)} times (positions "
                     f"{', '.join(str(i + 1) for i in found)}): name the one to edit by its position.")


def _edit(translator: Translator, src_tokens: Sequence[str], which: str, word: str) -> CorruptedSource:
    at = _position(src_tokens, which)
    vocab, notes = translator.src_vocab, []
    pieces = [word] if word in vocab else translator.src_spec.tokenize(word)
    if len(pieces) != 1:
        shown = ", ".join(visible_token(p) for p in pieces) or "none"
        raise InputError(f"The edit's word {word!r} reads as {len(pieces)} source tokens for this model ({shown}); "
                         "an edit replaces one token by one, so that the runs align: give one token, or a whole "
                         f"corrupted sentence of {len(src_tokens)} tokens.")
    token = pieces[0]
    if token not in vocab:
        notes.append(f"{token!r} is not in the model's source vocabulary: the corrupted run reads <unk> there.")
    if token == src_tokens[at]:
        notes.append(f"The edit leaves source token {at + 1} ({src_tokens[at]!r}) as it is: nothing is corrupted.")
    tokens = [*src_tokens[:at], token, *src_tokens[at + 1:]]
    return _made(translator, tokens, f"source token {at + 1} ({src_tokens[at]!r}) -> {token!r}", tuple(notes))
