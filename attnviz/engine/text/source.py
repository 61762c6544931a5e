"""Reading a sentence into a translation model's source ids, and its output tokens back into text: the torch-free
half of a translator, shared by ``engine.translator.Translator`` and the plain runtime (``engine.plain``).

A ``SourceText`` needs ``src_spec``/``tgt_spec`` (tokenizers), ``src_vocab``, ``languages`` (a multilingual
model's tags, or None), ``kind`` (its ``source_bos``) and ``model.max_source_len``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attnviz.engine.errors import InputError, NotTextError
from attnviz.engine.text.tokenize import LANGUAGE_NAMES, TokenizerSpec, hidden_characters, visible_token
from attnviz.engine.text.vocab import EOS, SOS, Vocab


def _fit(tokens: list[str], vocab: Vocab, limit: int, too_long: str) -> tuple[list[str], list[str]]:
    """Cut ``tokens`` to ``limit``, warning with ``too_long`` (a template of n, limit and dropped), and warn about
    tokens the vocabulary lacks."""
    warnings = []
    if len(tokens) > limit:
        warnings.append(too_long.format(n=len(tokens), limit=limit, dropped=len(tokens) - limit))
        tokens = tokens[:limit]
    unknown = sorted({t for t in tokens if t not in vocab})
    if unknown:
        shown = ", ".join(visible_token(t, named=True) for t in unknown[:8]) + (" ..." if len(unknown) > 8 else "")
        warnings.append(f"Not in the model's vocabulary (read as <unk>): {shown}")
    return tokens, warnings


def _text(value: object, what: str) -> str:
    """``value`` if it is text (``None`` reads as no text). Bytes are refused, not decoded: the engine cannot know
    their encoding (Latin-1 bytes would decode wrongly or not at all), and a program that reads bytes knows it; the
    command line decodes its input itself and reports each line it cannot."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    hint = f": decode it first, e.g. {what}.decode('utf-8')" if isinstance(value, (bytes, bytearray)) else ""
    raise NotTextError(f"The {what} must be text (str), not {type(value).__name__}{hint}.")


def _read_text(spec: TokenizerSpec, text: str) -> tuple[list[str], list[str]]:
    """``text``'s tokens, and a warning when invisible characters in it were read as spaces or left out."""
    hidden = hidden_characters(text)
    return spec.tokenize(text), [hidden] if hidden else []


class SourceText:
    """Source preparation and detokenizing over the attributes the module's docstring names."""

    src_spec: TokenizerSpec
    tgt_spec: TokenizerSpec
    src_vocab: Vocab
    languages: Any
    kind: Any
    model: Any

    def prepare_source(self, text: str) -> tuple[list[str], list[int], list[str]]:
        """Tokenize ``text`` into (labels, ids, warnings); labels and ids include ``<sos>``/``<eos>``."""
        text = _text(text, "sentence")
        if not text.strip():
            raise InputError("Nothing to translate: the sentence is empty. Type a sentence in "
                             f"{LANGUAGE_NAMES.get(self.src_spec.lang, self.src_spec.lang)}.")
        tokens, hidden = _read_text(self.src_spec, text)
        if not tokens:
            raise InputError("Nothing to translate: the text has no words after removing control characters.")
        tag, note = self.languages.source_tag(text) if self.languages is not None else (None, None)
        tokens, warnings = _fit(tokens, self.src_vocab, self.model.max_source_len - 2 - (tag is not None),
                                "The sentence has {n} tokens but the model reads at most {limit}; the last {dropped} "
                                "were dropped.")
        warnings = hidden + warnings + ([note] if note else [])
        labels, ids = [SOS, *tokens, EOS], self.src_vocab.encode(tokens, add_sos_eos=True)
        if not self.kind.source_bos:  # the kind reads no <sos> before the source
            labels, ids = labels[1:], ids[1:]
        if tag is not None:  # a multilingual model's source language tag, before the pieces or after </s>
            at = len(ids) if self.languages is not None and self.languages.src_suffix else 0
            labels.insert(at, tag)
            ids.insert(at, self.src_vocab.id(tag))
        return labels, ids, warnings

    def detokenize(self, tokens: Sequence[str]) -> str:
        tags = set(self.languages.tags) if self.languages is not None else set()
        return self.tgt_spec.detokenize([t for t in tokens if t != EOS and t not in tags])
