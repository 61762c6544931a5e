"""Per-language tokenizers and the text normalisation recipes of the reference models.

A ``TokenizerSpec`` is a small frozen description (language, splitting mode, lowercasing, normalisation) that travels
inside checkpoints, so a loaded model tokenizes exactly as it was trained. spaCy's blank pipelines are created once
per language and cached: the first ``spacy.blank('fr')`` costs seconds.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any

from attnviz.engine.errors import ConfigError

MODES = ("spacy", "whitespace", "chars", "sentencepiece")
WORD_START = "\u2581"  # "▁": SentencePiece marks the piece that starts a word with it
NORMALIZERS = ("none", "tatoeba")
LANGUAGE_NAMES = {"de": "German", "en": "English", "fr": "French"}

_SPACES = re.compile(r"\s+")


_TATOEBA_PUNCT = re.compile(r"([.!?])")
_TATOEBA_OTHER = re.compile(r"[^a-zA-Z.!?]+")


def languages_label(src_lang: str, tgt_lang: str, has_source: bool = True, tgt_mode: str = "spacy") -> str:
    """What a model works on, for people: "German -> English", or "English characters (language model)"."""
    src, tgt = LANGUAGE_NAMES.get(src_lang, src_lang), LANGUAGE_NAMES.get(tgt_lang, tgt_lang)
    if has_source:
        return f"{src} -> {tgt}"
    return f"{tgt} {'characters' if tgt_mode == 'chars' else 'words'} (language model)"


def clean_text(text: str) -> str:
    """Drop control and format characters, turn every kind of space (TAB, U+00A0, U+202F...) into one space."""
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch.isspace() or cat == "Zs":
            kept.append(" ")
        elif cat in ("Cc", "Cf", "Cs", "Co", "Cn"):
            continue
        else:
            kept.append(ch)
    return _SPACES.sub(" ", "".join(kept)).strip()


def normalize_tatoeba(text: str) -> str:
    """Reference B's recipe: lowercase, strip accents (NFD minus marks), space before .!?, letters and .!? only."""
    text = "".join(c for c in unicodedata.normalize("NFD", text.lower().strip()) if unicodedata.category(c) != "Mn")
    text = _TATOEBA_PUNCT.sub(r" \1", text)
    text = _TATOEBA_OTHER.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


@functools.cache
def _spacy_tokenizer(lang: str):  # -> spacy.tokenizer.Tokenizer
    import spacy  # slow import (about 2 s): only when a spaCy tokenizer is first needed

    try:
        return spacy.blank(lang).tokenizer
    except Exception as exc:  # spaCy raises ImportError/ValueError subclasses for unknown codes
        raise ConfigError(f"spaCy has no tokenizer for language {lang!r}: {exc}") from exc


@dataclass(frozen=True)
class TokenizerSpec:
    """How one side of a corpus is split into tokens."""

    lang: str
    # "spacy" (blank pipeline), "whitespace", "chars" (one token per character) or "sentencepiece" (subword pieces
    # of ``model_proto``; a piece that starts a word begins with WORD_START)
    mode: str = "spacy"
    lowercase: bool = True
    normalize: str = "none"  # "none" or "tatoeba" (reference B)
    # the serialized SentencePiece model of mode "sentencepiece"; checkpoints store it as a tensor, not in JSON
    model_proto: bytes = field(default=b"", repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"tokenizer mode must be one of {MODES}, not {self.mode!r}")
        if self.normalize not in NORMALIZERS:
            raise ConfigError(f"normalize must be one of {NORMALIZERS}, not {self.normalize!r}")
        if not re.fullmatch(r"[a-z]{2,3}", self.lang):
            raise ConfigError(f"language must be a two- or three-letter code such as 'de', not {self.lang!r}")
        if (self.mode == "sentencepiece") != bool(self.model_proto):
            raise ConfigError("a sentencepiece tokenizer needs its SentencePiece model, and only it takes one")

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able settings (without ``model_proto``, which travels as bytes of its own)."""
        data = asdict(self)
        del data["model_proto"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], model_proto: bytes = b"") -> TokenizerSpec:
        return cls(**data, model_proto=model_proto)

    def prepare(self) -> None:
        """Create the underlying tokenizer now (so a later call does not pay for it)."""
        if self.mode == "spacy":
            _spacy_tokenizer(self.lang)
        elif self.mode == "sentencepiece":
            _sentencepiece(self.model_proto)

    def tokenize(self, text: str) -> list[str]:
        text = clean_text(text)
        if self.normalize == "tatoeba":
            text = normalize_tatoeba(text)
        elif self.lowercase:
            text = text.lower()
        if self.mode == "chars":
            return list(text)
        if self.mode == "whitespace":
            return text.split()
        if self.mode == "sentencepiece":
            return _sentencepiece(self.model_proto).encode(text, out_type=str)
        return [tok.text for tok in _spacy_tokenizer(self.lang)(text) if not tok.is_space]

    def detokenize(self, tokens: list[str]) -> str:
        """Tokens of this side back into text."""
        if self.mode == "sentencepiece":
            return _sentencepiece(self.model_proto).decode(list(tokens))
        return detokenize(tokens, self.mode)

    def word_starts(self, tokens: list[str]) -> list[bool]:
        """Which tokens begin a word: every token, except SentencePiece pieces without the word-start mark
        (special tokens such as ``<eos>`` stand alone)."""
        if self.mode != "sentencepiece":
            return [True] * len(tokens)
        return [t.startswith(WORD_START) or (t.startswith("<") and t.endswith(">")) or i == 0
                for i, t in enumerate(tokens)]


@functools.lru_cache(maxsize=8)
def _sentencepiece(model_proto: bytes):  # -> sentencepiece.SentencePieceProcessor
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model_proto)
    except Exception as exc:  # sentencepiece raises RuntimeError/OSError with its own text for a bad model
        raise ConfigError(f"the SentencePiece model cannot be read ({exc}); the file is damaged") from None
    return processor


_NO_SPACE_BEFORE = {".", ",", "!", "?", ";", ":", ")", "]", "}", "%", "...", "n't", "'s", "'re", "'m", "'ll", "'ve", "'d"}
_NO_SPACE_AFTER = {"(", "[", "{", "$"}


def detokenize(tokens: list[str], mode: str = "spacy") -> str:
    """Join tokens into readable text: no space before closing punctuation and English clitics."""
    if mode == "chars":
        return "".join(tokens)
    out: list[str] = []
    for tok in tokens:
        if out and tok not in _NO_SPACE_BEFORE and out[-1] not in _NO_SPACE_AFTER:
            out.append(" ")
        out.append(tok)
    text = "".join(out)
    return text[:1].upper() + text[1:] if mode == "spacy" else text
