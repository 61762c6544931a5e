"""Activation patching (causal tracing) registered with the attribution registry. Torch-free: the method is listed
without a network; its math (``patching``) is imported when one is computed. It reads the probe points of a network
of Transformer layers (each layer's output, each attention block's per-head output), so it is defined for the kinds
whose registry entry says ``value_vectors`` or ``reads_prompt`` (a decoder-only LLM: its prompt's pass names its
layers' points as an encoder's, its output steps as a decoder's) and that read a source to corrupt.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from attnviz.engine.attribution.base import AttributionEvent, AttributionMethod, AttributionSettings, register

if TYPE_CHECKING:
    from attnviz.engine.kinds import ModelKind
    from attnviz.engine.translator import Translator


def _not_defined(kind: ModelKind) -> str | None:
    if not kind.has_source:
        return "a language model reads no source to corrupt; patching compares a clean and a corrupted source"
    if not kind.value_vectors and not kind.reads_prompt:  # an LLM's layers pass probe points one by one
        return ("its layers run fused inside one LSTM, so no layer's output at one position, nor one attention "
                "head's output, can be taken from one run into another")
    return None


def _patching(translator: Translator, src_tokens: tuple[str, ...], tokens: tuple[str, ...],
              settings: AttributionSettings, stop: threading.Event | None,
              roles: Sequence[str] = ()) -> Iterator[AttributionEvent]:
    from attnviz.engine.attribution.patching.method import patching_steps

    yield from patching_steps(translator, src_tokens, tokens, settings, stop, roles)


PATCHING = register(AttributionMethod(
    name="patching",
    label="Activation patching",
    description="How much of the clean output token's log-probability a corrupted run (one source word edited, or "
                "every source token <unk>) gets back when one layer's output at one position is taken from the "
                "clean run (causal tracing, Meng et al. 2022): 1 all of it, 0 none",
    layered=True,
    compute=_patching,
    settings=("corrupt",),
    not_defined=_not_defined,
    reads_roles=True,
))
