"""Attention sinks: the tokens heads park weight on when no content key is relevant (``<sos>``, ``<eos>``,
punctuation, language tags; in an LLM's prompt also the chat template's markers and line breaks), and maps with
those columns hidden and every row renormalised.

Why heads put weight there: softmax rows must sum to 1, so a head with nothing to attend to at a step dumps its
mass on a token that is always present and carries little content; the value vectors of such tokens are small, so
the dump changes the output little (Clark et al. 2019, Kobayashi et al. 2020). Hiding them shows how the rest of the
weight is shared out. Torch-free: the GUI imports it at start-up. Names: R rows (queries), C columns (keys).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import numpy as np

from attnviz.engine.analysis.names import is_language_tag
from attnviz.engine.text.tokenize import WORD_START
from attnviz.engine.text.vocab import EOS, SOS, UNK

WHY = ("Heads park weight on <sos>, <eos>, punctuation, language tags and (in an LLM's prompt) the chat template's "
       "markers and line breaks when no content token is relevant (a softmax row must sum to 1); those tokens carry "
       "little, so hiding them and renormalising shows how the rest is shared.")
# a chat template's marker (<bos>, <|im_start|>, <start_of_turn>, <|eot_id|>); <unk> stands for content, not a sink
_MARKER = re.compile(r"<\|?[A-Za-z_][\w.-]*\|?>")


def is_punctuation(token: str) -> bool:
    return bool(token) and all(unicodedata.category(c).startswith("P") for c in token)


def is_sink(token: str) -> bool:
    """``<sos>``, ``<eos>``, a language tag, punctuation (a SentencePiece word-start mark aside), a chat template's
    marker or a token of white space only (an LLM prompt's line breaks)."""
    return (token in (SOS, EOS) or is_language_tag(token) or is_punctuation(token.lstrip(WORD_START))
            or (token != UNK and bool(_MARKER.fullmatch(token))) or (bool(token) and token.isspace()))


def sink_columns(tokens: Sequence[str]) -> np.ndarray:
    """[C] bool, True at the sink tokens of a key axis."""
    return np.array([is_sink(t) for t in tokens], dtype=bool)


def without_sinks(maps: np.ndarray, sinks: np.ndarray) -> np.ndarray:
    """``maps`` [..., R, C] without the ``sinks`` columns ([C] bool), each row renormalised to sum to 1 over the
    columns kept (by the absolute values, so that signed attributions keep their signs; a row with nothing left
    stays zero). Every column a sink: returned as is, since hiding them all would leave nothing to show."""
    if sinks.shape != maps.shape[-1:]:
        raise ValueError(f"sink mask of shape {sinks.shape} for maps with {maps.shape[-1]} columns")
    if sinks.all():
        return maps
    return renormalised(maps[..., ~sinks])


def renormalised(maps: np.ndarray) -> np.ndarray:
    """``maps`` [..., R, C] with each row scaled to sum to 1 by its absolute values (signs kept; a zero row stays
    zero): the share of what a view shows that each shown column has."""
    total = np.abs(maps).sum(-1, keepdims=True)
    return np.divide(maps, total, out=np.zeros_like(maps), where=total > 0)
