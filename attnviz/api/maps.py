"""The maps of the notebook API: one attention map (``AttentionMap``) and one layer of an attribution
(``AttributionMap``), each a matrix with its row and column labels that turns into numpy or pandas and draws itself
in Jupyter as the app exports a view.

Rows are queries (output tokens, or source tokens for encoder self-attention) and columns keys, as in the app.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnviz.api.display import heatmap_png, png_html, require_pandas
from attnviz.engine.attribution.base import Attribution, get_method


@dataclass(frozen=True)
class Heatmap:
    """A labelled matrix [R, C]: ``matrix[i, j]`` is row ``rows[i]``'s value on column ``cols[j]``. ``masked`` [R, C]
    marks cells that cannot matter (a future position a causal query may not see), drawn hatched grey."""

    matrix: np.ndarray
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    title: str
    row_axis: str = "queries"
    col_axis: str = "keys"
    value: str = "attention weight"
    masked: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.matrix.shape != (len(self.rows), len(self.cols)):
            raise ValueError(f"a map of shape {self.matrix.shape} needs {self.matrix.shape[0]} row and "
                             f"{self.matrix.shape[1] if self.matrix.ndim == 2 else '?'} column labels, not "
                             f"{len(self.rows)} and {len(self.cols)}")

    @property
    def signed(self) -> bool:
        """Whether the map has negative values, so it is drawn on the diverging scale centred on zero (as the app
        decides)."""
        return bool(self.matrix.size) and float(np.nanmin(self.matrix)) < 0

    def to_numpy(self) -> np.ndarray:
        """A copy of the matrix [R, C]."""
        return np.array(self.matrix, copy=True)

    def to_pandas(self) -> Any:
        """The matrix as a ``pandas.DataFrame`` indexed by the row labels, one column per column label."""
        pandas = require_pandas()
        return pandas.DataFrame(self.to_numpy(), index=pandas.Index(self.rows, name=self.row_axis),
                                columns=pandas.Index(self.cols, name=self.col_axis))

    def _repr_png_(self) -> bytes:
        return heatmap_png(self.matrix, self.rows, self.cols, self.row_axis, self.col_axis, self.title, self.masked,
                           self.signed, self.value)

    def _repr_html_(self) -> str:
        return png_html(self._repr_png_(), self.title)

    def save(self, path: str) -> None:
        """Write the drawing to ``path`` (.png, .svg or .pdf), exactly as the app's File > Export view does."""
        from attnviz.plots.heatmap import save_heatmap

        save_heatmap(path, self.matrix, self.rows, self.cols, self.row_axis, self.col_axis, self.title,
                     per_map=False, masked=self.masked, signed=self.signed, value=self.value)


@dataclass(frozen=True)
class AttentionMap(Heatmap):
    """One attention map of a translation: ``kind`` ("encoder", "decoder" or "cross"), ``layer`` (from 0) and
    ``head`` (from 0, or None for the mean of the layer's heads). Every row sums to 1."""

    kind: str = "cross"
    layer: int = 0
    head: int | None = None


@dataclass(frozen=True)
class AttributionMap(Heatmap):
    """One layer of an attribution: a row per output token; the source tokens, then the decoder inputs (the target
    prefix, each marked with an arrow) as columns. ``result`` is the engine's whole ``Attribution`` (every layer,
    the scores, the notes and the settings that reproduce it)."""

    result: Attribution | None = field(default=None, repr=False)
    layer: int = 0

    @property
    def method(self) -> str:
        return self.result.method if self.result is not None else ""

    @property
    def notes(self) -> tuple[str, ...]:
        """What a reader must know about these numbers (e.g. integrated gradients' completeness gap)."""
        return self.result.notes if self.result is not None else ()

    def source_share(self) -> np.ndarray:
        """[T]: the share of each output token's attribution that comes from the source (at this layer)."""
        if self.result is None:
            raise ValueError("this map carries no attribution")
        return self.result.source_share()[self.layer]


def prefix_label(token: str) -> str:
    """How a decoder input is labelled beside the source tokens (the app marks the target prefix with an arrow)."""
    return f"\u2192{token}"


def attribution_map(result: Attribution, layer: int, title: str) -> AttributionMap:
    """The ``layer`` (from 0) of ``result`` as one map [T, S + T]: source columns, then prefix columns; a decoder
    input after an output's step cannot matter to it and is masked."""
    t, s = len(result.tokens), len(result.src_tokens)
    matrix = np.concatenate([result.source[layer], result.prefix[layer]], axis=1)
    masked = np.zeros(matrix.shape, dtype=bool)
    masked[:, s:] = np.triu(np.ones((t, t), dtype=bool), k=1)
    what = result.settings.get("quantity") or get_method(result.method).label  # log p(chosen), or "ALTI+"
    return AttributionMap(matrix, result.tokens, result.src_tokens + tuple(prefix_label(x) for x in
                                                                         result.decoder_inputs),
                          title, "output tokens", "source tokens, then the target prefix (\u2192)", str(what), masked,
                          result=result, layer=layer)
