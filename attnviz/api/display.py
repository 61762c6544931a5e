"""How the notebook API's results show themselves: a map as PNG through the same drawing as the app's exports
(``attnviz.plots.heatmap``), a table as HTML, and the optional pandas import with one clear message.

matplotlib and pandas are imported only when a result is drawn or turned into a table, so ``import attnviz.api``
stays light.
"""

from __future__ import annotations

import base64
import html
import importlib
import io
from collections.abc import Sequence
from typing import Any

import numpy as np


def require_pandas() -> Any:
    """The pandas module, or an ImportError saying how to get it (pandas is optional for attnviz)."""
    try:
        pandas = importlib.import_module("pandas")
    except ImportError:
        raise ImportError("to_pandas() needs pandas, which attnviz does not install by itself: pip install pandas "
                          "(or use to_numpy(), which needs nothing more)") from None
    return pandas


def heatmap_png(matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str], row_axis: str, col_axis: str,
                title: str, masked: np.ndarray | None = None, signed: bool = False,
                value: str = "attention weight", dpi: int = 100) -> bytes:
    """``matrix`` [R, C] drawn as the app exports a view (fixed 0..1 scale, or the diverging one when ``signed``),
    as PNG bytes."""
    from attnviz.plots.heatmap import heatmap_figure

    fig = heatmap_figure(matrix, rows, cols, row_axis, col_axis, title, masked=masked, signed=signed, value=value,
                         dpi=dpi)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight", pad_inches=0.15)
    return buffer.getvalue()


def png_html(png: bytes, caption: str) -> str:
    """An ``<img>`` holding ``png`` inline, under a caption (what a notebook shows for a map)."""
    data = base64.b64encode(png).decode("ascii")
    return (f"<figure><img src=\"data:image/png;base64,{data}\" alt=\"{html.escape(caption)}\"/>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def table_html(header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str) -> str:
    """A plain HTML table (every cell escaped); floats with 4 digits."""
    def cell(value: Any) -> str:
        text = "" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)
        return html.escape(text)

    head = "".join(f"<th>{cell(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><caption>{html.escape(caption)}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody>" \
           "</table>"
