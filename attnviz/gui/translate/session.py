"""The decoding shown in the Translate tab: the encoder pass and every step so far, with views cut to a step.

Plain Python (no Qt), so the shapes and slicing are tested directly. Every step is kept, so scrubbing back is
instant; matrices are assembled by the engine's ``assemble`` (the same code that builds ``Translation``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from attnviz.engine.events import ATTENTION_KINDS, DecodeStep, EncoderPass, Translation, assemble
from attnviz.engine.subwords import WordAttention, merge_translation


@dataclass
class DecodeSession:
    detokenize: Callable[[list[str]], str]
    # a subword model's piece-to-word merge (``engine.subwords.merge_translation`` with its tokenizers); the maps
    # and heatmaps are merged while ``merge_words`` is on
    merger: Callable[[Translation], WordAttention] | None = None
    merge_words: bool = False
    encoder: EncoderPass | None = None
    steps: list[DecodeStep] = field(default_factory=list)
    finished: bool = False
    _cache: dict[int, Translation] = field(default_factory=dict, repr=False)
    _merged: dict[int, WordAttention] = field(default_factory=dict, repr=False)

    def add(self, event: EncoderPass | DecodeStep) -> None:
        if isinstance(event, EncoderPass):
            self.encoder, self.steps, self.finished = event, [], False
            self._cache.clear()
            self._merged.clear()
        else:
            self.steps.append(event)

    @property
    def src_tokens(self) -> tuple[str, ...]:
        return self.encoder.src_tokens if self.encoder else ()

    def kinds(self) -> list[str]:
        """Attention kinds this model produced, in the canonical order."""
        if self.encoder is None:
            return []
        have = {"encoder"} if self.encoder.encoder_attention is not None else set()
        if self.steps:
            have |= {"decoder"} if self.steps[0].self_attention is not None else set()
            have |= {"cross"} if self.steps[0].cross_attention is not None else set()
        return [k for k in ATTENTION_KINDS if k in have]

    def translation(self, upto: int) -> Translation:
        """The translation made of steps 0..upto (all of them when upto is -1 or past the end)."""
        n = len(self.steps) if upto < 0 else min(upto + 1, len(self.steps))
        if n not in self._cache:
            steps = self.steps[:n]
            self._cache[n] = assemble(self.encoder, steps, self.detokenize([s.token for s in steps]))
        return self._cache[n]

    def view(self, upto: int) -> Translation | WordAttention:
        """What the attention views show as of step ``upto``: the translation, or its pieces merged into words."""
        t = self.translation(upto)
        if not self.merge_words or self.merger is None:
            return t
        n = len(t.tokens)
        if n not in self._merged:
            self._merged[n] = self.merger(t)
        return self._merged[n]

    def maps(self, kind: str, upto: int) -> np.ndarray | None:
        """[L, H, R, C] of one kind as of step ``upto`` (words when merged)."""
        if self.encoder is None:
            return None
        return self.view(upto).attention.get(kind)

    def heatmap(self, kind: str, layer: int, head: int | None, upto: int):
        """(matrix [R, C], row labels, column labels, highlighted row) for one layer and head (None = mean)."""
        maps = self.maps(kind, upto)
        if maps is None:
            return None
        layer = min(layer, maps.shape[0] - 1)
        matrix = maps[layer].mean(axis=0) if head is None else maps[layer, min(head, maps.shape[1] - 1)]
        view = self.view(upto)
        rows, cols = view.axis_labels(kind)
        if kind == "encoder":
            highlight = None
        elif isinstance(view, WordAttention):  # merged as of this step: its last word holds the step
            highlight = len(rows) - 1
        else:
            highlight = min(upto, len(rows) - 1) if upto >= 0 else len(rows) - 1
        return matrix, rows, cols, highlight

    def cross_row(self, step: int, layer: int, head: int | None) -> np.ndarray | None:
        """Cross-attention of output step ``step`` over the source [S]."""
        if not 0 <= step < len(self.steps) or self.steps[step].cross_attention is None:
            return None
        rows = self.steps[step].cross_attention[min(layer, self.steps[step].cross_attention.shape[0] - 1)]
        return rows.mean(axis=0) if head is None else rows[head]

    def cross_column(self, src_index: int, upto: int, layer: int, head: int | None) -> np.ndarray | None:
        """How much each output step up to ``upto`` attended to source token ``src_index`` [T] (token strips show
        pieces, so this reads the unmerged maps)."""
        maps = self.translation(upto).attention.get("cross") if self.encoder is not None else None
        if maps is None or not 0 <= src_index < maps.shape[-1]:
            return None
        layer_maps = maps[min(layer, maps.shape[0] - 1)]
        return (layer_maps.mean(axis=0) if head is None else layer_maps[head])[:, src_index]


def word_merger(translator) -> Callable[[Translation], WordAttention] | None:
    """The piece-to-word merge of a subword model's translations; None for a word or character model."""
    if "sentencepiece" not in (translator.src_spec.mode, translator.tgt_spec.mode):
        return None
    return functools.partial(merge_translation, src_spec=translator.src_spec, tgt_spec=translator.tgt_spec)
