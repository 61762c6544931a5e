"""ALTI+ and value zeroing as attribution methods: one teacher-forced translation in, ``Attribution`` out.

Both give one map per decoder layer over the source tokens then the decoder inputs (``Attribution.source`` [L, T, S]
beside ``prefix`` [L, T, T]); ALTI+ rolled out through the layers (what an output token rests on after layer l,
rows summing to 1, the source share its source columns' sum), value zeroing per layer as the paper shows it. A
language model has no source: its maps have no source columns. A decoder-only LLM (a ``one_stream`` network) is
analysed over its one stream, prompt then output (``mixing.capture``): its source columns are the shown prompt, and
the prompt's last token, its first decoder input, is the prefix's first column.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from attnviz.engine.attribution.base import Attribution, AttributionEvent, AttributionProgress
from attnviz.engine.attribution.mixing.alti import AltiMaps, alti_maps
from attnviz.engine.attribution.mixing.capture import STREAM, Capture, capture, teacher_forced_ids
from attnviz.engine.attribution.mixing.value_zeroing import ZeroingMaps, value_zeroing_steps

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

ALTI_SETTINGS = {"distance": "L1 (Manhattan)", "normalisation": "max(0, ||y||_1 - d) / row sum",
                 "layer norm": "linear with the output's own mean and variance", "rollout": True,
                 "feed-forward": "left out (acts on each position alone)"}
LLM_ALTI_SETTINGS = ALTI_SETTINGS | {
    "layer norm": "pre-attention RMSNorm inside each key's own term; a post-attention RMSNorm (Gemma) linear with "
                  "the block output's own rms", "sequence": "prompt and output as one stream (decoder-only ALTI)"}
ZEROING_SETTINGS = {"distance": "cosine", "normalisation": "row sum (decoder: source and prefix together)",
                    "rollout": False, "zeroed": "every head's value vector of one token"}


LLM_NOTE = ("A decoder-only LLM: ALTI over the prompt and the output as one sequence (Ferrando et al. 2023), "
            "RMSNorm and grouped-query attention decomposed exactly; the prompt's last token, the first decoder input, "
            "is the prefix's first column (<sos>). ALTI-Logit is not computed: these are mixing shares.")


def capture_sentence(translator: Translator, src_tokens: Sequence[str], tokens: Sequence[str]) -> Capture:
    src, tgt_in = teacher_forced_ids(translator, src_tokens, tokens)
    return capture(translator.model, src, tgt_in)


def sentence_alti(translator: Translator, src_tokens: Sequence[str], tokens: Sequence[str]) -> AltiMaps:
    """ALTI and ALTI+ of one teacher-forced translation (heads switched off in this thread stay off); a one-stream
    network's over its stream (``total`` [L, T, S + T] all the same)."""
    return alti_maps(capture_sentence(translator, src_tokens, tokens))


def _split(total: np.ndarray, s: int) -> tuple[np.ndarray, np.ndarray]:
    return np.ascontiguousarray(total[..., :s]), np.ascontiguousarray(total[..., s:])


def alti_steps(translator: Translator, src_tokens: tuple[str, ...], tokens: tuple[str, ...], settings,
               stop: threading.Event | None) -> Iterator[AttributionEvent]:
    """The registered method ``alti-plus``: one pass, then the rollout after each decoder layer."""
    yield AttributionProgress(0, 1, "ALTI+", "passes")
    maps = sentence_alti(translator, src_tokens, tokens)
    if stop is not None and stop.is_set():
        return
    yield AttributionProgress(1, 1, "ALTI+", "passes")  # the pass is done: no "0/1" left behind on a terminal
    source, prefix = _split(maps.total, len(src_tokens))
    notes: tuple[str, ...] = ("ALTI+ rolled out through the layers: layer l shows what each output token rests on "
                              "after decoder layer l; rows sum to 1 over the source and the prefix.",)
    stream = STREAM in maps.layers
    if not translator.has_source:
        notes += ("A language model reads no source: this is ALTI of its decoder self-attention.",)
    if stream:
        notes += (LLM_NOTE,)
    yield Attribution("alti-plus", dict(LLM_ALTI_SETTINGS if stream else ALTI_SETTINGS), src_tokens, tokens,
                      source, prefix, layered=True, notes=notes)


STREAM_ZEROING_NOTE = ("Value zeroing per layer (not rolled out) over the prompt and the output as one sequence: "
                       "each position's value zeroed in every key/value head; each row normalised over the prompt "
                       "and the prefix together. The prompt's last token, the first decoder input, is the prefix's "
                       "first column (<sos>); a later position or one outside a sliding window scores exactly 0.")
ZEROING_NOTE = ("Value zeroing per decoder layer (not rolled out): each row is normalised over the source tokens "
                "(zeroed in cross-attention) and the decoder inputs (zeroed in self-attention) together.")


def zeroing_steps(translator: Translator, src_tokens: tuple[str, ...], tokens: tuple[str, ...], settings,
                  stop: threading.Event | None) -> Iterator[AttributionEvent]:
    """The registered method ``value-zeroing``: the layers one by one (progress between them), per-layer maps."""
    cap = capture_sentence(translator, src_tokens, tokens)
    total = sum(len(layers) for layers in cap.layers.values())
    yield AttributionProgress(0, total, "value zeroing", "layers")
    maps = None
    for item in value_zeroing_steps(cap):
        if stop is not None and stop.is_set():
            return
        if isinstance(item, ZeroingMaps):
            maps = item
        else:
            yield AttributionProgress(item, total, "value zeroing", "layers")
    if maps is None:
        return
    source, prefix = _split(maps.decoder, len(src_tokens))
    note = STREAM_ZEROING_NOTE if maps.stream is not None else ZEROING_NOTE
    yield Attribution("value-zeroing", dict(ZEROING_SETTINGS), src_tokens, tokens, source, prefix, layered=True,
                      notes=(note,))
