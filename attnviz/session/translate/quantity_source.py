"""The attention panel's source for the quantity the Translate tab's selector shows, Qt-free: ``QuantitySource``
reads the document's own maps for attention, else a computed ``QuantityResult``'s cut at the step, with the sink
columns hidden on request, and names what it shows (the map's title: the quantity and its settings; the caption:
what its numbers mean).
"""

from __future__ import annotations

import numpy as np

from attnviz.engine.analysis.sinks import renormalised, sink_columns, without_sinks
from attnviz.engine.events import ATTENTION_KINDS, AttentionKind, Translation
from attnviz.engine.subwords import WordAttention
from attnviz.engine.text.tokenize import piece_label, visible_token
from attnviz.session.translate.quantities import (
    ATTRIBUTION,
    LENS,
    PREFIX_MARK,
    PREFIX_ONLY,
    QuantityResult,
    quantity_title,
)


class QuantitySource:
    """The attention panel's source (``AttentionSource``) for one quantity over a decode document: the document's
    own maps for attention, else ``result``'s cut at the step; with ``sinks`` False, the sink columns hidden and the
    rows renormalised; with ``span``, an LLM prompt's axis cut to the sentence's own tokens (its template and
    instruction left out) and each attention row renormalised over them: an LLM puts most of a row on ``<bos>`` and
    the template, so the sentence's raw weights would all read near 0 on the 0..1 scale."""

    def __init__(self, document, result: QuantityResult | None, sinks: bool = True, span: bool = False):
        self.document, self.result, self.sinks, self.span = document, result, sinks, span

    @property
    def mergeable(self) -> bool:
        return self.result is None and self.document.mergeable  # pieces merge for the raw weights only

    def kinds(self) -> list[str]:
        if self.result is None:
            return self.document.kinds()
        return [k for k in (*ATTENTION_KINDS, ATTRIBUTION.key, LENS.key) if k in self.result.maps]

    def kind_info(self, kind: str) -> AttentionKind:
        if kind == ATTRIBUTION.key and self.result is not None and not self.result.sources:
            return PREFIX_ONLY  # a language model reads no source
        if kind in ATTENTION_KINDS:
            info = self.document.kind_info(kind)
            cut = self._cut_span(kind, False)
            return info._replace(key_axis=f"{info.key_axis}, the sentence only") if cut and kind == "cross" else info
        return LENS if kind == LENS.key else ATTRIBUTION

    def shared(self, kind: str) -> tuple[str, ...]:
        return self.document.shared(kind) if kind in ATTENTION_KINDS else (kind,)

    def kv_heads(self) -> int:
        return self.document.kv_heads()

    def opens_on_peaked_layer(self, kind: str) -> bool:
        return kind == "cross" and self.result is None and self._cut_span(kind, False) is not None

    # -- an LLM prompt's sentence span -------------------------------------------------------------------------------

    def _cut_span(self, kind: str, merged: bool) -> tuple[int, int] | None:
        """The sentence's token span [a, b) on the prompt axis of ``kind``, when the view is cut to it."""
        encoder = self.document.encoder
        if not self.span or merged or encoder is None or not encoder.roles or kind in ("decoder", LENS.key):
            return None
        if kind == ATTRIBUTION.key and (self.result is None or not self.result.sources):
            return None
        return encoder.span

    def _sources(self, merged: bool = False) -> int:
        """The attribution's source columns as shown."""
        cut = self._cut_span(ATTRIBUTION.key, merged)
        return (cut[1] - cut[0]) if cut else self.result.sources if self.result is not None else 0

    def _spanned(self, kind: str, values, merged: bool):
        """``values`` (maps [..., R, C], a mask [R, C] or (rows, cols) labels) cut to the sentence's span."""
        cut = self._cut_span(kind, merged)
        if cut is None:
            return values
        a, b = cut
        if isinstance(values, tuple):
            rows, cols = values
            if kind == ATTRIBUTION.key and self.result is not None:
                return rows, cols[a:b] + cols[self.result.sources:]
            return (rows[a:b] if kind == "encoder" else rows), cols[a:b]
        if kind == "encoder":
            return values[..., a:b, a:b]
        if kind == ATTRIBUTION.key and self.result is not None:
            return np.concatenate([values[..., a:b], values[..., self.result.sources:]], axis=-1)
        return values[..., a:b]

    def outside(self, kind: str, layer: int, upto: int) -> np.ndarray | None:
        """[R, C] True at the cells ``layer``'s sliding window leaves out (zero by construction), as shown."""
        maps = self.document.maps(kind, upto) if kind in ATTENTION_KINDS and self.result is None else None
        if maps is None:
            return None
        found = self.document.outside(kind, layer, *maps.shape[-2:])
        if found is None:
            return None
        found = self._spanned(kind, found, False)
        sinks = sink_columns(self._labels(kind, upto, False)[1])
        return found if self.sinks or sinks.all() else found[:, ~sinks]

    def describe(self, kind: str) -> tuple[str, str]:
        """(title prefix, caption) of the quantity shown: what it is, its settings, which token is attributed."""
        hidden = "" if self.sinks else " Sink columns (<sos>, <eos>, punctuation, language tags) are hidden and " \
                                      "every row renormalised over the rest."
        result = self.result
        if result is None:
            return "", self._rows_sum(kind) + hidden
        q = result.quantity
        settings = ", ".join(f"{k} {v}" for k, v in result.settings.items())
        rows = "each row sums to 1" if q.key.startswith(("norm", "rollout")) else "one row per output token"
        step = self.document.current
        said = f" The highlighted row is output token {step + 1}, {self.document.steps[step].token!r}: what it " \
               "depended on." if kind == ATTRIBUTION.key and 0 <= step < len(self.document.steps) else ""
        notes = "".join(f" {n}" for n in result.notes)
        about = f" ({settings})" if settings else ""
        return f"{quantity_title(q)} \u00b7 ", f"{rows}. {q.description}{about}.{said}{notes}{hidden}"

    def _rows_sum(self, kind: str) -> str:
        """What an attention map's rows add up to: 1, or for an LLM's output rows 1 with the other part of the one
        softmax (the prompt's columns and the output's), and less when the view is cut to the sentence."""
        shared = [k for k in self.shared(kind) if k != kind and k != "encoder"]
        cut = self._cut_span(kind, False) is not None
        if kind == "encoder" or not shared:
            return "each row sums to 1." if not cut else \
                "the view is cut to the sentence (template and instruction left out) and each row renormalised " \
                "over its tokens: a cell is that token's share of the row's attention to the sentence."
        other = self.document.kind_info(shared[0]).label
        if cut:
            return (f"the view is cut to the sentence: template and instruction columns are left out and each row "
                    f"renormalised over the sentence's tokens (a cell is that token's share of the row's attention "
                    f"to the sentence; untick Prompt: sentence only for the model's own weights, whose row and the "
                    f"same step's row of '{other}' are one softmax).")
        return f"each row and the same step's row of '{other}' are one softmax: together they sum to 1."

    def _labels(self, kind: str, upto: int, merged: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
        view: Translation | WordAttention = self.document.view(upto, merged)
        if kind == LENS.key and self.result is not None:  # a column per decoder layer
            return view.tokens, self.result.columns
        if kind != ATTRIBUTION.key or self.result is None:
            return self._spanned(kind, view.axis_labels(kind), merged)
        n = len(view.tokens)
        return self._spanned(kind, (view.tokens, self.result.columns[: self.result.sources + n]), merged)

    def future(self, kind: str, upto: int) -> np.ndarray | None:
        """[R, C] True where a query may not look: decoder inputs after its own step (self-attention, or the
        attribution's prefix columns); the sink columns left out as the heatmap leaves them."""
        labels = self._labels(kind, upto, False)
        rows, cols = len(labels[0]), len(labels[1])
        sources = 0 if kind == "decoder" else self._sources() if self.result is not None else 0
        if kind not in ("decoder", ATTRIBUTION.key) or cols - sources != rows:
            return None
        future = np.zeros((rows, cols), dtype=bool)
        future[:, sources:] = np.triu(np.ones((rows, rows), dtype=bool), 1)
        sinks = sink_columns(labels[1])
        return future if self.sinks or sinks.all() else future[:, ~sinks]  # as ``without_sinks`` leaves the map

    def _cut(self, kind: str, upto: int) -> np.ndarray | None:
        """The result's maps of ``kind`` as of step ``upto``: rows of the steps so far, prefix keys so far."""
        result = self.result
        maps = result.maps.get(kind) if result is not None else None
        if result is None or maps is None or kind == "encoder":
            return maps
        n = len(self.document.translation(upto).tokens)
        keys = n if kind == "decoder" else result.sources + n if kind == ATTRIBUTION.key else maps.shape[-1]
        return maps[:, :, :n, :keys]

    def maps(self, kind: str, upto: int, merged: bool = False) -> np.ndarray | None:
        if self.document.encoder is None:
            return None
        maps = self.document.maps(kind, upto, merged) if self.result is None else self._cut(kind, upto)
        if maps is None:
            return None
        cut = kind in ATTENTION_KINDS and self._cut_span(kind, merged) is not None
        maps = self._spanned(kind, maps, merged)
        if cut:  # attention weights over the sentence alone: each row's share of what is shown
            maps = renormalised(maps)
        if self.sinks:
            return maps
        return without_sinks(maps, sink_columns(self._labels(kind, upto, merged)[1]))

    def heatmap(self, kind: str, layer: int, head: int | None, upto: int, merged: bool = False):
        """(matrix [R, C], row labels, column labels, highlighted row), as ``DecodeDocument.heatmap``."""
        shown = self.document.heatmap(kind, layer, head, upto, merged) if kind in ATTENTION_KINDS else None
        maps = self.maps(kind, upto, merged)
        if maps is None:
            return None
        layer = min(layer, maps.shape[0] - 1)
        matrix = maps[layer].mean(axis=0) if head is None else maps[layer, min(head, maps.shape[1] - 1)]
        rows, cols = (tuple(visible_token(t) for t in axis) for axis in self._labels(kind, upto, merged))
        if kind == ATTRIBUTION.key and self.result is not None:
            n = self._sources(merged)
            cols = cols[:n] + tuple(PREFIX_MARK + piece_label(c) for c in cols[n:])  # "→·man", not "→▁man"
        if not self.sinks:
            cols = tuple(c for c, sink in zip(cols, sink_columns(self._labels(kind, upto, merged)[1])) if not sink) \
                or cols
        highlight = shown[3] if shown is not None else len(rows) - 1
        return matrix, rows, cols, highlight
