"""Activation patching (causal tracing, Meng et al. 2022), registered here with the attribution registry: the
corrupted source (``corrupted``), the batched patched runs (``runs``) and the method's generator (``method``).
Torch-free: the method is listed without a network; its math is imported when one is computed. It reads the probe
points of a network of Transformer layers (each layer's output, each attention block's per-head output), so it is
defined where the network offers those points (``offers``; a decoder-only LLM's prompt pass names its layers' points
as an encoder's, its output steps as a decoder's) and the model reads a source to corrupt.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from attnviz.engine.attribution.base import AttributionEvent, AttributionMethod, AttributionSettings, register

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator


def _not_defined(translator: Translator) -> str | None:
    if not translator.has_source:
        return "a language model reads no source to corrupt; patching compares a clean and a corrupted source"
    missing = translator.model.offers("dec.*.out", "*.*.*.heads")  # each layer's output, each block's heads
    if missing is not None:
        return (f"{missing}: patching takes a layer's output at one position, or one attention head's output, from "
                "one run into another")
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
