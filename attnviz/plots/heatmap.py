"""One attention map drawn with matplotlib (for PNG/SVG export): labelled axes, colour bar, highlighted row."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle


def draw_heatmap(fig: Figure, matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str], row_axis: str,
                 col_axis: str, title: str = "", highlight_row: int | None = None, per_map: bool = False) -> None:
    """Draw ``matrix`` [R, C] on ``fig`` (cleared first); fixed 0..1 colour scale unless ``per_map``."""
    fig.clear()
    ax = fig.add_subplot(1, 1, 1)
    vmin, vmax = (float(matrix.min()), float(matrix.max())) if per_map else (0.0, 1.0)
    image = ax.imshow(matrix, cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(cols)), labels=list(cols), rotation=90)
    ax.set_yticks(range(len(rows)), labels=list(rows))
    ax.set_xlabel(f"columns: {col_axis}")
    ax.set_ylabel(f"rows: {row_axis}")
    if title:
        ax.set_title(title)
    if highlight_row is not None:
        ax.add_patch(Rectangle((-0.5, highlight_row - 0.5), len(cols), 1, fill=False, edgecolor="#ff5050", lw=2))
    fig.colorbar(image, ax=ax, label="attention weight")
    fig.tight_layout()


def save_heatmap(path: str, matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str], row_axis: str,
                 col_axis: str, title: str = "", highlight_row: int | None = None, per_map: bool = False) -> None:
    """Write the map to ``path``; the format follows the suffix (.png, .svg, .pdf)."""
    size = (max(5.0, 1.6 + 0.32 * len(cols)), max(4.0, 1.8 + 0.3 * len(rows)))
    fig = Figure(figsize=size, dpi=150)
    draw_heatmap(fig, matrix, rows, cols, row_axis, col_axis, title, highlight_row, per_map)
    fig.savefig(path)
