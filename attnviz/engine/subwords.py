"""Subword pieces merged into words: the attention of a SentencePiece model read per word.

A word is a piece that starts a word (``▁...``, or a special token) and the pieces that continue it. Merging sums
the attention over a word's key pieces (the weight a query gives the word) and averages it over the word's query
pieces (what the word as a whole attends to), so every merged row still sums to 1. Decoder self-attention keys are
the decoder inputs (``<sos>`` and every output piece but the last), grouped the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from attnviz.engine.events import Translation
from attnviz.engine.text.tokenize import WORD_START, TokenizerSpec


def word_spans(starts: Sequence[bool]) -> list[tuple[int, int]]:
    """[start, end) of every word, from which positions begin a word (the first position always does)."""
    bounds = [i for i, s in enumerate(starts) if s or i == 0]
    return list(zip(bounds, [*bounds[1:], len(starts)], strict=True))


def join_pieces(pieces: Sequence[str]) -> str:
    """A word's label: its pieces joined, without the word-start mark."""
    return "".join(pieces).replace(WORD_START, "") or WORD_START


def merge_matrix(weights: np.ndarray, rows: Sequence[tuple[int, int]], cols: Sequence[tuple[int, int]]) -> np.ndarray:
    """[..., Tq, Tk] -> [..., Wq, Wk]: mean over each row word's pieces of the sum over each column word's pieces."""
    summed = np.stack([weights[..., a:b].sum(-1) for a, b in cols], axis=-1)  # [..., Tq, Wk]
    return np.stack([summed[..., a:b, :].mean(-2) for a, b in rows], axis=-2)  # [..., Wq, Wk]


@dataclass(frozen=True)
class WordAttention:
    """A translation's tokens and attention with pieces merged into words (the export reads it like a
    ``Translation``)."""

    src_tokens: tuple[str, ...]
    tokens: tuple[str, ...]
    decoder_inputs: tuple[str, ...]
    text: str
    attention: dict[str, np.ndarray] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    # the decoding steps stay per output piece (a probability, entropy and top-k belong to the piece chosen):
    # ``step_tokens`` names those pieces, so the per-step figures stay beside the merged maps
    probabilities: tuple[float, ...] = ()
    steps: tuple = ()
    step_tokens: tuple[str, ...] = ()

    def axis_labels(self, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(row labels, column labels) of one attention kind, as ``Translation.axis_labels``."""
        rows = self.src_tokens if kind == "encoder" else self.tokens
        return rows, self.decoder_inputs if kind == "decoder" else self.src_tokens


def merge_translation(t: Translation, src_spec: TokenizerSpec, tgt_spec: TokenizerSpec) -> WordAttention:
    """``t`` with every attention kind merged from pieces into words (a word-level model's is unchanged)."""
    src = word_spans(src_spec.word_starts(list(t.src_tokens)))
    out = word_spans(tgt_spec.word_starts(list(t.tokens)))
    inputs = word_spans(tgt_spec.word_starts(list(t.decoder_inputs)))
    spans = {"encoder": (src, src), "decoder": (out, inputs), "cross": (out, src)}
    attention = {kind: merge_matrix(m, *spans[kind]).astype(np.float32) for kind, m in t.attention.items()}

    def labels(tokens: Sequence[str], word: list[tuple[int, int]]) -> tuple[str, ...]:
        return tuple(join_pieces(tokens[a:b]) for a, b in word)

    return WordAttention(labels(t.src_tokens, src), labels(t.tokens, out), labels(t.decoder_inputs, inputs), t.text,
                         attention, t.warnings, t.probabilities, t.steps, t.tokens)
