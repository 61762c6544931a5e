"""One attention map drawn with matplotlib (for PNG/SVG export): labelled axes, colour bar, highlighted row, and
masked cells (future positions a causal query may not see) hatched grey as the app draws them, not as weight zero.
A signed map (gradient x input, integrated gradients, a contrast) is drawn as the app draws it: a blue-white-red
scale centred on zero from -max|x| to +max|x|, so neither its negative values nor those above 1 are clipped away.

The title wraps to the figure's width and the file is cut to what was drawn, so neither edge of a long title (the
view, the model and the sentence) is clipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

MASKED_FACE, MASKED_HATCH = "#969696", "#6e6e6e"  # the app's grey and hatch (gui.attention.heatmap)


def masked_runs(masked: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """(row, first column, length) of each run of masked cells, row by row: one patch per run, not per cell."""
    for i, row in enumerate(np.asarray(masked, dtype=bool)):
        edges = np.flatnonzero(np.diff(np.concatenate(([0], row.astype(np.int8), [0]))))
        for start, stop in zip(edges[::2], edges[1::2]):
            yield i, int(start), int(stop - start)


def draw_heatmap(fig: Figure, matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str], row_axis: str,
                 col_axis: str, title: str = "", highlight_row: int | None = None, per_map: bool = False,
                 masked: np.ndarray | None = None, signed: bool = False, value: str = "attention weight") -> None:
    """Draw ``matrix`` [R, C] on ``fig`` (cleared first); fixed 0..1 colour scale unless ``per_map`` (or
    ``signed``: the diverging scale centred on zero); ``masked`` [R, C] cells hatched grey; ``value`` names what
    the colour bar measures."""
    fig.clear()
    ax = fig.add_subplot(1, 1, 1)
    shown = matrix if masked is None or not masked.any() else matrix[~masked]
    vmin, vmax = (float(shown.min()), float(shown.max())) if per_map and shown.size else (0.0, 1.0)
    if signed:
        limit = float(np.nanmax(np.abs(shown))) if shown.size and not np.isnan(shown).all() else 0.0
        vmin, vmax = (-limit, limit) if limit > 0 else (-1.0, 1.0)
    image = ax.imshow(matrix, cmap="RdBu_r" if signed else "viridis", vmin=vmin, vmax=vmax, aspect="auto",
                      interpolation="nearest")
    if masked is not None:
        for i, j, n in masked_runs(masked):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), n, 1, facecolor=MASKED_FACE, edgecolor=MASKED_HATCH,
                                   hatch="///", lw=0))
    ax.set_xticks(range(len(cols)), labels=list(cols), rotation=90)
    ax.set_yticks(range(len(rows)), labels=list(rows))
    ax.set_xlabel(f"columns: {col_axis}")
    ax.set_ylabel(f"rows: {row_axis}")
    if title:
        ax.set_title(title, wrap=True)
    if highlight_row is not None:
        ax.add_patch(Rectangle((-0.5, highlight_row - 0.5), len(cols), 1, fill=False, edgecolor="#ff5050", lw=2))
    fig.colorbar(image, ax=ax, label=value)
    fig.tight_layout()


def heatmap_figure(matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str], row_axis: str, col_axis: str,
                   title: str = "", highlight_row: int | None = None, per_map: bool = False,
                   masked: np.ndarray | None = None, signed: bool = False, value: str = "attention weight",
                   dpi: int = 150) -> Figure:
    """A figure sized to the map's labels with the map drawn on it (exports, and the notebook API's pictures)."""
    size = (max(5.0, 1.6 + 0.32 * len(cols)), max(4.0, 1.8 + 0.3 * len(rows)))
    fig = Figure(figsize=size, dpi=dpi)
    draw_heatmap(fig, matrix, rows, cols, row_axis, col_axis, title, highlight_row, per_map, masked, signed, value)
    return fig


def save_heatmap(path: str, matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str], row_axis: str,
                 col_axis: str, title: str = "", highlight_row: int | None = None, per_map: bool = False,
                 masked: np.ndarray | None = None, signed: bool = False, value: str = "attention weight") -> None:
    """Write the map to ``path``; the format follows the suffix (.png, .svg, .pdf)."""
    fig = heatmap_figure(matrix, rows, cols, row_axis, col_axis, title, highlight_row, per_map, masked, signed, value)
    fig.savefig(path, bbox_inches="tight", pad_inches=0.15)  # the file holds everything drawn, title included
