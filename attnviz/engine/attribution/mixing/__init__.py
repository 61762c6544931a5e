"""Context mixing in the Transformer networks: ALTI+ (Ferrando et al. 2022) and value zeroing (Mohebbi et al. 2023),
registered here with the attribution registry. Torch-free: the methods are listed without a network; their math
(``capture``, ``alti``, ``value_zeroing``, ``methods``) is imported when one is computed. Both read the Transformer
networks' attention blocks (value vectors, output projection, residual, norms), so they are defined where the
network offers them (``offers``: ``attention_block``, ``run_layer`` and the blocks' probe points): every Transformer
network, and decoder-only LLMs, whose RMSNorm blocks with grouped-query attention the same decomposition reads over
the prompt and the output as one stream.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from attnviz.engine.attribution.base import AttributionEvent, AttributionMethod, AttributionSettings, register

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

NEEDS = ("attention_block", "run_layer", "*.*.*.v", "*.*.*.weights", "*.*.*.resid")  # what both methods read
WHY_NOT = ("ALTI+ and value zeroing decompose attention blocks, whose output is a sum of one vector per input token "
           "(its value vector through the block's output projection)")


def _not_defined(translator: Translator) -> str | None:
    missing = translator.model.offers(*NEEDS)
    return None if missing is None else f"{missing}; {WHY_NOT}"


def _alti(translator: Translator, src_tokens: tuple[str, ...], tokens: tuple[str, ...],
          settings: AttributionSettings, stop: threading.Event | None) -> Iterator[AttributionEvent]:
    from attnviz.engine.attribution.mixing.methods import alti_steps

    yield from alti_steps(translator, src_tokens, tokens, settings, stop)


def _zeroing(translator: Translator, src_tokens: tuple[str, ...], tokens: tuple[str, ...],
             settings: AttributionSettings, stop: threading.Event | None) -> Iterator[AttributionEvent]:
    from attnviz.engine.attribution.mixing.methods import zeroing_steps

    yield from zeroing_steps(translator, src_tokens, tokens, settings, stop)


ALTI_PLUS = register(AttributionMethod(
    name="alti-plus",
    label="ALTI+",
    description="How much each output token rests on each source token and each earlier output, through attention, "
                "residual and LayerNorm, rolled out through the layers (Ferrando et al. 2022; a decoder-only LLM: ALTI "
                "over prompt and output as one sequence, Ferrando et al. 2023); rows sum to 1",
    layered=True,
    compute=_alti,
    not_defined=_not_defined,
))

VALUE_ZEROING = register(AttributionMethod(
    name="value-zeroing",
    label="Value zeroing",
    description="How much each layer's output for a token changes (cosine distance) when one input token's value "
                "vector is zeroed (Mohebbi et al. 2023); rows normalised to sum to 1",
    layered=True,
    compute=_zeroing,
    not_defined=_not_defined,
))
