"""A decode's views cut at a step, assembled once and kept: the engine's ``Translation`` of its first n steps
(``assemble`` builds it as the engine does) and, for a subword model, its pieces merged into words. Plain Python (no
Qt, no torch); ``DecodeDocument`` owns one and forgets it with its decode.

Only the latest ``KEPT_VIEWS`` of each are kept: scrubbing needs the steps around the one shown, and one view per step
shown would keep O(T^3) floats of a long decode (a 256-step answer's 256 prefixes, each with [L, H, T, T] maps).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeAlias, TypeVar

from attnviz.engine.events import DecodeStep, EncoderPass, Translation, assemble
from attnviz.engine.subwords import WordAttention, merge_translation
from attnviz.engine.text.tokenize import TokenizerSpec

Detokenize: TypeAlias = Callable[[Sequence[str]], str]
Merger: TypeAlias = Callable[[Translation], WordAttention]  # a subword model's piece-to-word merge
KEPT_VIEWS = 8
V = TypeVar("V")


def word_merger(src_spec: TokenizerSpec, tgt_spec: TokenizerSpec) -> Merger | None:
    """The piece-to-word merge of a subword model's translations; None for a word or character model."""
    if "sentencepiece" not in (src_spec.mode, tgt_spec.mode):
        return None
    return functools.partial(merge_translation, src_spec=src_spec, tgt_spec=tgt_spec)


class CutViews:
    """The latest assembled translations and merged views, by the number of steps they hold."""

    def __init__(self) -> None:
        self._translations: dict[int, Translation] = {}
        self._merged: dict[int, WordAttention] = {}

    def clear(self) -> None:
        self._translations.clear()
        self._merged.clear()

    def translation(self, encoder: EncoderPass, steps: Sequence[DecodeStep], detokenize: Detokenize) -> Translation:
        """The translation made of ``steps`` (a decode's first n), assembled once."""
        return _kept(self._translations, len(steps),
                     lambda: assemble(encoder, list(steps), detokenize([s.token for s in steps])))

    def merged(self, translation: Translation, merger: Merger) -> WordAttention:
        """``translation``'s pieces merged into words, once per length."""
        return _kept(self._merged, len(translation.tokens), lambda: merger(translation))


def _kept(views: dict[int, V], n: int, build: Callable[[], V]) -> V:
    """``views[n]``, built when missing; the oldest dropped beyond ``KEPT_VIEWS``."""
    if n not in views:
        views[n] = build()
        while len(views) > KEPT_VIEWS:
            views.pop(next(iter(views)))
    return views[n]
