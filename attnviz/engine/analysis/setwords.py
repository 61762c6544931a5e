"""A test set's words, not the model's tokens: each set word tokenised alone, and attention merged back into words.

A published alignment set is already tokenised (words separated by spaces) and its gold links count those words.
So the model's tokenizer runs inside each set word (spaCy may split ``cherry-pick`` into three tokens, SentencePiece
a word into pieces, the vocabulary may read a token as ``<unk>``), and every token keeps the number of the word it
came from: the map from tokens to set words is built from how each word was tokenised, never guessed afterwards.
With teacher forcing the decoder reads exactly these target tokens. Cross-attention then merges into set words as
subword merging does (a target word's rows averaged, a source word's columns summed). A word that gives no token
(nothing left after normalising, or past the model's length limit) gets no link. Where the model's tokenizer, run on
the whole line, makes a token that spans two set words, the pair is reported (the word-by-word reading splits it at
the set's boundary). Names: n target words, m source words, k target tokens, s source tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnviz.engine.text.tokenize import WORD_START, TokenizerSpec

EXAMPLES = 5  # examples a report quotes


@dataclass(frozen=True)
class WordTokens:
    """One side of a pair: the model's tokens (no specials) and, per token, the set word it belongs to."""

    tokens: tuple[str, ...]
    word_of: tuple[int, ...]
    n_words: int

    def cut(self, limit: int) -> WordTokens:
        return WordTokens(self.tokens[:limit], self.word_of[:limit], self.n_words)

    def unread(self) -> list[int]:
        """Set words that have no token."""
        return sorted(set(range(self.n_words)) - set(self.word_of))


def tokenize_words(spec: TokenizerSpec, words: Sequence[str]) -> WordTokens:
    tokens: list[str] = []
    word_of: list[int] = []
    for index, word in enumerate(words):
        pieces = [t for t in spec.tokenize(word) if t.strip()]  # a char model's spaces are no word's token
        tokens += pieces
        word_of += [index] * len(pieces)
    return WordTokens(tuple(tokens), tuple(word_of), len(words))


def spanning_tokens(spec: TokenizerSpec, words: Sequence[str]) -> list[str]:
    """Tokens of the whole line, as the model's tokenizer makes them, whose characters come from two set words or
    more (quoted as ``token <- word word``). Empty when the tokenizer changes characters so they cannot be matched."""
    owner: list[int] = []
    for index, word in enumerate(words):
        owner += [index] * len("".join(spec.normalized(word).split()))
    stream = "".join("".join(spec.normalized(w).split()) for w in words)
    found: list[str] = []
    pos = 0
    for token in spec.tokenize(" ".join(words)):
        text = "".join(token.replace(WORD_START, "").split())
        if stream[pos:pos + len(text)] != text:
            return found  # the tokenizer rewrote characters: no boundary to compare with from here on
        covered = sorted(set(owner[pos:pos + len(text)]))
        if len(covered) > 1:
            found.append(f"{token} <- {' '.join(words[i] for i in covered)}")
        pos += len(text)
    return found


@dataclass
class TokenReport:
    """What tokenising inside the set's words did, summed over the corpus."""

    words: int = 0
    split_words: int = 0  # set words read as two tokens or more
    unknown: int = 0  # tokens the vocabulary reads as <unk>
    unread: list[str] = field(default_factory=list)  # "line N: side word 'x'" for words with no token
    spanning: list[str] = field(default_factory=list)  # "line N: token <- word word"

    def add(self, number: int, side: str, words: Sequence[str], tokens: WordTokens, spec: TokenizerSpec,
            vocab) -> None:
        self.words += len(words)
        counts = np.bincount(np.asarray(tokens.word_of, dtype=int), minlength=len(words))
        self.split_words += int((counts > 1).sum())
        self.unknown += sum(t not in vocab for t in tokens.tokens)
        self.unread += [f"line {number}: {side} word {i + 1} {words[i]!r}" for i in tokens.unread()]
        self.spanning += [f"line {number}: {side} {s}" for s in spanning_tokens(spec, words)]

    def to_json(self) -> dict[str, Any]:
        return {"set_words": self.words, "split_words": self.split_words, "unknown_tokens": self.unknown,
                "words_without_token": len(self.unread), "words_without_token_examples": self.unread[:EXAMPLES],
                "spanning_tokens": len(self.spanning), "spanning_token_examples": self.spanning[:EXAMPLES]}

    def summary(self) -> str:
        text = (f"{self.words} set words, {self.split_words} read as several tokens, {self.unknown} tokens read as "
                f"<unk>, {len(self.unread)} without a token, {len(self.spanning)} tokens of whole-line tokenising "
                "spanning two set words")
        examples = (self.spanning + self.unread)[:EXAMPLES]
        return text + ("; e.g. " + "; ".join(examples) if examples else "")


def word_attention(cross: np.ndarray, tgt: WordTokens, src: WordTokens, src_offset: int, shift: bool = False
                   ) -> np.ndarray:
    """Teacher-forced cross-attention [..., Tq, S] of one pair -> [..., n, m] over the set's words.

    Row q of the decoder inputs ``<sos> y1 .. yk`` predicts token q + 1; target token t's row is row t, or row
    t + 1 (whose input is the token itself) with ``shift``. Source token t is column ``src_offset + t`` (after
    ``<sos>`` when the model reads one). Each token row is renormalised over the source tokens, then a target word's
    rows are averaged and a source word's columns summed; a word with no token gets a zero row or column.
    """
    k, s = len(tgt.tokens), len(src.tokens)
    rows = cross[..., 1:k + 1, :] if shift else cross[..., :k, :]
    rows = rows[..., src_offset:src_offset + s]  # [..., k, s]
    rows = rows / np.maximum(rows.sum(-1, keepdims=True), 1e-12)
    tgt_onehot = np.zeros((k, tgt.n_words))
    tgt_onehot[np.arange(k), list(tgt.word_of)] = 1.0
    src_onehot = np.zeros((s, src.n_words))
    src_onehot[np.arange(s), list(src.word_of)] = 1.0
    summed = tgt_onehot.T @ rows @ src_onehot  # [..., n, m]
    return summed / np.maximum(tgt_onehot.sum(0), 1.0)[:, None]
