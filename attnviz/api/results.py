"""A translation in the notebook API (``TranslationResult``): its tokens and text, and the questions to ask of it,
each answered by the engine the app and the command line use: an attention map, an attribution, a word alignment
and the statistics of every head on it.
"""

from __future__ import annotations

import html
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from attnviz.api.display import require_pandas, table_html
from attnviz.api.maps import AttentionMap, AttributionMap, attribution_map
from attnviz.api.tables import HeadStatistics, WordAlignment
from attnviz.engine.errors import InputError
from attnviz.engine.events import Translation
from attnviz.engine.heads import KIND_ALIASES

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

AXES = {"encoder": ("source tokens (queries)", "source tokens (keys)"),
        "decoder": ("output tokens (queries)", "decoder inputs (keys)"),
        "cross": ("output tokens (queries)", "source tokens (keys)")}
Event = TypeVar("Event")


def last_event(events: Iterable[object], kind: type[Event]) -> Event:
    """The result of an engine generator: its last event, a ``kind`` (the ones before it report progress)."""
    last = deque(events, maxlen=1)
    if not last or not isinstance(last[0], kind):  # only a stopped generator ends without its result
        raise RuntimeError(f"the computation ended without its {kind.__name__}")
    return last[0]


def index(value: int | None, size: int, what: str) -> int:
    """``value`` as an index from 0 into ``size`` items (negative counts from the end, None is the last)."""
    if value is None:
        return size - 1
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not -size <= value < size:
        raise InputError(f"{what} must be a whole number from 0 to {size - 1} (or -1 for the last), not {value!r}")
    return int(value) % size


@dataclass(frozen=True)
class TranslationResult:
    """One translated sentence with every attention map of every layer and head. ``tokens`` are the output tokens
    as the model produced them (ending in ``<eos>`` when it stopped by itself); ``translation`` is the engine's
    ``Translation`` (probabilities, warnings, every step's top-k)."""

    source: str
    translation: Translation
    translator: Translator = field(repr=False)

    @property
    def text(self) -> str:
        return self.translation.text

    @property
    def src_tokens(self) -> tuple[str, ...]:
        return self.translation.src_tokens

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.translation.tokens

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the engine said about this sentence: words it dropped or read as unknown, a guessed language."""
        return self.translation.warnings

    @property
    def kinds(self) -> tuple[str, ...]:
        """The attention kinds this model has ("encoder", "decoder", "cross")."""
        return tuple(self.translation.attention)

    def attention(self, kind: str = "cross", layer: int | None = None, head: int | None = None) -> AttentionMap:
        """One attention map: ``kind`` ("cross", "encoder" or "decoder"; "enc", "dec" and "self" work too),
        ``layer`` from 0 (None or -1: the last), ``head`` from 0 (None: the mean of the layer's heads)."""
        name = KIND_ALIASES.get(kind) if isinstance(kind, str) else None
        if name not in self.translation.attention:
            raise InputError(f"this model has no {kind!r} attention; choose one of {', '.join(self.kinds)}")
        weights = self.translation.attention[name]  # [L, H, rows, cols]
        layer = index(layer, weights.shape[0], "layer")
        maps = weights[layer]
        matrix = maps.mean(0) if head is None else maps[index(head, weights.shape[1], "head")]
        head = None if head is None else index(head, weights.shape[1], "head")
        rows, cols = self.translation.axis_labels(name)
        masked = np.triu(np.ones(matrix.shape, dtype=bool), k=1) if name == "decoder" else None
        which = "mean of heads" if head is None else f"head {head}"
        row_axis, col_axis = AXES[name]
        return AttentionMap(np.asarray(matrix, dtype=np.float64), tuple(rows), tuple(cols),
                            f"{name} attention, layer {layer} (from 0), {which}: {self.source}", row_axis, col_axis,
                            masked=masked, kind=name, layer=layer, head=head)

    def attribute(self, method: str = "alti-plus", *, layer: int | None = None, **settings: Any) -> AttributionMap:
        """What each output token depended on, by an attribution ``method`` of the engine's registry ("alti-plus",
        "value-zeroing", "saliency", "gradient-x-input", "integrated-gradients", "patching"; ``Model.methods()``
        lists those the model allows). ``settings`` are ``AttributionSettings`` fields (``foil``, ``steps``,
        ``baseline``, ``aggregate``, ``target``, ``corrupt``); a method refuses those it does not read. Layered
        methods give one map per layer: ``layer`` picks it (from 0; None: the last)."""
        from attnviz.engine.attribution.base import Attribution, AttributionSettings, attribution_steps

        try:
            chosen = AttributionSettings(**settings)
        except TypeError:
            raise InputError(f"unknown attribution setting in {sorted(settings)}; the settings are aggregate, "
                             "steps, baseline, target, foil, corrupt") from None
        result = last_event(attribution_steps(self.translator, method, self.src_tokens, self.tokens, chosen,
                                              roles=self.translation.roles),
                            Attribution)
        at = index(layer, result.layers, "layer")
        return attribution_map(result, at, f"{result.method}, layer {at} (from 0): {self.source}")

    def align(self, *, layer: int | None = None, head: int | None = None, shift: bool = False,
              threshold: float | None = None, target: str | None = None) -> WordAlignment:
        """Word alignment of the source with this translation (or with ``target``, a translation of your own) read
        from cross-attention by the engine's aligner (``attnviz align``): the words are the space-separated ones,
        each read as the model tokenises it. ``layer`` and ``head`` from 0 (both None: every layer and head
        averaged); ``shift`` reads the step after each word (Chen et al. 2020); ``threshold`` links every source
        word with at least that weight instead of the row's largest."""
        from attnviz.engine.analysis.alignment import AlignmentReady, align_steps  # torch: imported when aligning

        if (layer is None) != (head is None):
            raise InputError("give both layer and head (from 0) for one head, or neither for every head averaged")
        words = (target if target is not None else self.text).split()
        source = self.source.split()
        if not words or not source:
            raise InputError("nothing to align: the source and the translation need at least one word each")
        ready = last_event(align_steps(self.translator, [source], [words], layer=layer, head=head, shift=shift,
                                       threshold=threshold), AlignmentReady)
        links = sorted(tuple(int(x) for x in pair.split("-")) for pair in ready.alignments[0].split())
        return WordAlignment(tuple(source), tuple(words), tuple((i, j) for i, j in links), ready.chosen,
                             dict(ready.settings))

    def heads(self) -> HeadStatistics:
        """The statistics of every head on this sentence alone, its translation teacher-forced (see
        ``Model.heads`` for a corpus)."""
        from attnviz.engine.analysis.run import compute_head_stats

        return HeadStatistics(compute_head_stats(self.translator, [self.source], [self.text]))

    def to_pandas(self) -> Any:
        """One row per output token: position (from 0), token and its probability."""
        pandas = require_pandas()
        return pandas.DataFrame({"token": list(self.tokens), "probability": list(self.translation.probabilities)})

    def _repr_html_(self) -> str:
        rows = [[i, token, p] for i, (token, p) in enumerate(zip(self.tokens, self.translation.probabilities))]
        return f"<p><b>{html.escape(self.source)}</b> &rarr; <b>{html.escape(self.text)}</b></p>" + \
            table_html(["step", "token", "probability"], rows, "output tokens")
