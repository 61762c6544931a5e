"""Per-language tokenizers and the text normalisation recipes of the reference models.

A ``TokenizerSpec`` is a small frozen description (language, splitting mode, lowercasing, normalisation) that travels
inside checkpoints, so a loaded model tokenizes exactly as it was trained. spaCy's blank pipelines are created once
per language and cached: the first ``spacy.blank('fr')`` costs seconds.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from attnviz.engine.errors import ConfigError
from attnviz.engine.text.vocab import SPECIALS

MODES = ("spacy", "whitespace", "chars", "sentencepiece")
SUBWORD_MODELS = ("unigram", "bpe")
WORD_START = "\u2581"  # "▁": SentencePiece marks the piece that starts a word with it
NORMALIZERS = ("none", "tatoeba")
LANGUAGE_NAMES = {"de": "German", "en": "English", "fr": "French"}
MULTILINGUAL = "mul"  # ISO 639-2 "multiple languages": the source side of a model that reads many

_SPACES = re.compile(r"\s+")
# how a token made of white space is shown (a character model's space would otherwise be an empty label)
_BLANK_GLYPHS = {" ": ("\u2423", "space"), "\t": ("\u21e5", "tab"), "\n": ("\u21b5", "line break"),
                 "\u00a0": ("\u237d", "no-break space")}


def visible_token(token: str, named: bool = False) -> str:
    """``token`` with each white-space character drawn as a visible glyph (a space as "\u2423"); with ``named``, a
    token that is one such character also says what it is ("\u2423 (space)"), for a message a user reads."""
    if not token or not any(c.isspace() for c in token):
        return token
    shown = "".join(_BLANK_GLYPHS.get(c, ("\u2423", ""))[0] if c.isspace() else c for c in token)
    name = _BLANK_GLYPHS.get(token, ("", "white space" if token.isspace() and len(token) == 1 else ""))[1]
    return f"{shown} ({name})" if named and name else shown


QUIET_WORD_MARK = "\u00b7"  # "·": where a label of one line cannot draw a chip's tick, a word start's quiet mark


def piece_text(token: str) -> tuple[str, bool]:
    """A subword piece as the tokenizer writes words: SentencePiece's word-start mark "▁" (which most fonts draw as
    an underscore, "▁man" reading as "_man") taken off, and whether the piece starts a word. A lone "▁" is a space
    and a token that is not a piece is returned as it is."""
    if len(token) > 1 and token.startswith(WORD_START) and not token[1:].startswith(WORD_START):
        return token[1:], True
    return token, False


def piece_label(token: str) -> str:
    """``token`` for an axis label: its word start marked by a small middle dot instead of "▁", blanks visible."""
    text, starts = piece_text(token)
    return (QUIET_WORD_MARK if starts else "") + visible_token(text)


_TATOEBA_PUNCT = re.compile(r"([.!?])")
_TATOEBA_OTHER = re.compile(r"[^a-zA-Z.!?]+")


def languages_label(src_lang: str, tgt_lang: str, has_source: bool = True, tgt_mode: str = "spacy") -> str:
    """What a model works on, for people: "German -> English", or "English characters (language model)"."""
    src = LANGUAGE_NAMES.get(src_lang, "many languages" if src_lang == MULTILINGUAL else src_lang)
    tgt = LANGUAGE_NAMES.get(tgt_lang, tgt_lang)
    if has_source:
        return f"{src} -> {tgt}"
    return f"{tgt} {'characters' if tgt_mode == 'chars' else 'words'} (language model)"


# Characters that separate words although nothing shows them: read as spaces, like the control characters (NUL,
# ESC...), so that "Hund\x00Katze" or "Hund\u200bKatze" stays two words instead of becoming one unknown word. Other
# format characters (soft hyphen, joiners, direction marks, BOM) sit inside words or around text: left out.
_BREAKS = frozenset("\u200b\u180e")  # zero width space; Mongolian vowel separator (a space before Unicode 6.3)
_HIDDEN = ("Cc", "Cf", "Cs", "Co", "Cn")  # control, format, surrogate, private use, unassigned


def _reads_as_space(ch: str) -> bool:
    return ch.isspace() or ch in _BREAKS or unicodedata.category(ch) in ("Zs", "Cc")


def clean_text(text: str) -> str:
    """Turn every kind of space (TAB, U+00A0, U+202F...), control character and zero-width space into one space
    between words; drop the other format characters and code points nothing can show (see ``hidden_characters``)."""
    kept = []
    for ch in text:
        if _reads_as_space(ch):
            kept.append(" ")
        elif unicodedata.category(ch) not in _HIDDEN:
            kept.append(ch)
    return _SPACES.sub(" ", "".join(kept)).strip()


def hidden_characters(text: str) -> str | None:
    """A warning that says which invisible characters of ``text`` ``clean_text`` read as word breaks and which it
    left out (the user sees neither on screen), or None when there are none."""
    found = sorted({ch for ch in text if not ch.isspace() and unicodedata.category(ch) in _HIDDEN})
    if not found:
        return None
    groups = {"read as spaces between words": [c for c in found if _reads_as_space(c)],
              "left out": [c for c in found if not _reads_as_space(c)]}
    parts = [f"{how}: {', '.join(_char_name(c) for c in chars[:6])}{' ...' if len(chars) > 6 else ''}"
             for how, chars in groups.items() if chars]
    return "Invisible characters in the text were " + "; ".join(parts) + "."


def _char_name(ch: str) -> str:
    name = unicodedata.name(ch, "")  # control characters have no name
    return f"U+{ord(ch):04X}" + (f" {name}" if name else "")


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
    # mode "sentencepiece" in a recipe: the vocabulary training learns from the training split of this side
    vocab_size: int = 8000
    subword_model: str = "unigram"  # or "bpe"
    # the serialized SentencePiece model of mode "sentencepiece" (empty in a recipe until training learns one);
    # checkpoints store it as a tensor, not in JSON
    model_proto: bytes = field(default=b"", repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"tokenizer mode must be one of {MODES}, not {self.mode!r}")
        if self.normalize not in NORMALIZERS:
            raise ConfigError(f"normalize must be one of {NORMALIZERS}, not {self.normalize!r}")
        if not re.fullmatch(r"[a-z]{2,3}", self.lang):
            raise ConfigError(f"language must be a two- or three-letter code such as 'de', not {self.lang!r}")
        if self.model_proto and self.mode != "sentencepiece":
            raise ConfigError(f"only a sentencepiece tokenizer takes a SentencePiece model, not mode {self.mode!r}")
        if self.subword_model not in SUBWORD_MODELS:
            raise ConfigError(f"subword_model must be one of {SUBWORD_MODELS}, not {self.subword_model!r}")
        if not 16 <= self.vocab_size <= 1_000_000:
            raise ConfigError(f"vocab_size must be between 16 and 1,000,000, not {self.vocab_size}")

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
        text = self.normalized(text)
        if self.mode == "chars":
            return list(text)
        if self.mode == "whitespace":
            return text.split()
        if self.mode == "sentencepiece":
            return self._processor().encode(text, out_type=str)
        return [tok.text for tok in _spacy_tokenizer(self.lang)(text) if not tok.is_space]

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Tokens of this side back into text."""
        if self.mode == "sentencepiece":
            text = pieces_text(self._processor(), tokens)
            # lowercased pieces: capitalise the sentence as the word-level spaCy detokenizer does
            return text[:1].upper() + text[1:] if self.lowercase else text
        return detokenize(list(tokens), self.mode)

    def _processor(self):  # -> sentencepiece.SentencePieceProcessor
        if not self.model_proto:
            raise ConfigError("this sentencepiece tokenizer has no model yet: training learns one from the "
                              "training data, or a checkpoint brings its own")
        return _sentencepiece(self.model_proto)

    def normalized(self, text: str) -> str:
        """``text`` as the tokenizer sees it before splitting (control characters removed, case folded...)."""
        text = clean_text(text)
        if self.normalize == "tatoeba":
            return normalize_tatoeba(text)
        return text.lower() if self.lowercase else text

    def word_starts(self, tokens: list[str]) -> list[bool]:
        """Which tokens begin a word: every token, except SentencePiece pieces without the word-start mark
        (``<sos>``/``<eos>`` stand alone; byte pieces continue the word they are in)."""
        if self.mode != "sentencepiece":
            return [True] * len(tokens)
        return [t.startswith(WORD_START) or t in SPECIALS or i == 0 for i, t in enumerate(tokens)]

    def words(self) -> TokenizerSpec:
        """The word tokenizer BLEU counts with on this side: this spec, or for subword pieces the language's spaCy
        words (whitespace words for a language spaCy lacks), so subword and word models are scored alike."""
        if self.mode != "sentencepiece":
            return self
        mode = "spacy" if self.lang in LANGUAGE_NAMES else "whitespace"
        return TokenizerSpec(self.lang, mode=mode, lowercase=True, normalize=self.normalize)

    def scored_words(self, tokens: list[str]) -> list[str]:
        """This side's tokens as the words BLEU counts: unchanged for a word tokenizer; subword pieces are
        detokenized and split by ``words()``."""
        words = self.words()
        return list(tokens) if words is self else words.tokenize(self.detokenize(list(tokens)))

    def pieces(self) -> list[str]:
        """Every piece of a SentencePiece model but its own control symbols (its vocabulary, in id order)."""
        sp = self._processor()
        return [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]

    def trained(self, texts: list[str]) -> TokenizerSpec:
        """This spec with a SentencePiece model learned from ``texts`` (already the case: itself)."""
        if self.mode != "sentencepiece" or self.model_proto:
            return self
        return dataclasses.replace(self, model_proto=train_sentencepiece(
            [self.normalized(t) for t in texts], self.vocab_size, self.subword_model))


def train_sentencepiece(texts: list[str], vocab_size: int, model_type: str) -> bytes:
    """A SentencePiece model of ``vocab_size`` pieces (fewer when the texts hold fewer), with byte fallback so that
    any character can be read without <unk>; deterministic for the same texts."""
    import io

    import sentencepiece

    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ConfigError("cannot learn a SentencePiece vocabulary from no text")
    model = io.BytesIO()
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size, model_type=model_type,
            character_coverage=1.0, byte_fallback=True, hard_vocab_limit=False, bos_id=-1, eos_id=-1, unk_id=0,
            pad_id=-1, num_threads=1, minloglevel=2)
    except RuntimeError as exc:  # sentencepiece reports a too-small vocabulary (and other limits) this way
        characters = len(set("".join(texts)))
        raise ConfigError(f"cannot learn a SentencePiece vocabulary of {vocab_size} pieces: it needs room for the "
                          f"{characters} characters of the text and 256 byte pieces; raise vocab_size "
                          f"({str(exc).split(']')[-1].strip()[:120]})") from None
    return model.getvalue()

@functools.lru_cache(maxsize=8)
def _sentencepiece(model_proto: bytes):  # -> sentencepiece.SentencePieceProcessor
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model_proto)
    except Exception as exc:  # sentencepiece raises RuntimeError/OSError with its own text for a bad model
        raise ConfigError(f"the SentencePiece model cannot be read ({exc}); the file is damaged") from None
    return processor


def pieces_text(processor, tokens: Sequence[str], specials: Collection[str] = SPECIALS) -> str:
    """SentencePiece pieces back into text as the Hugging Face tokenizers write it (``MarianTokenizer``'s
    ``decode(skip_special_tokens=True)``): ``specials`` left out, the pieces decoded by the model, and the word-start
    mark of a piece the model does not know read as a space. A shared vocabulary (Marian's ``vocab.json``) holds both
    sides' pieces, and SentencePiece copies a piece it does not know as it is, mark included."""
    kept = [t for t in tokens if t not in specials]
    return str(processor.decode_pieces(kept)).replace(WORD_START, " ").strip()


_NO_SPACE_BEFORE = {".", ",", "!", "?", ";", ":", ")", "]", "}", "%", "...",
                    "n't", "'s", "'re", "'m", "'ll", "'ve", "'d"}
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
