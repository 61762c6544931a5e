"""The logit lens by language, drawn with matplotlib (for PNG/SVG/PDF export): a corpus' share of each language per
decoder layer (stacked bars, one per layer, the pivot question's plot), and one translation's layer x step strip
(each cell coloured by the language of the layer's top token at that step, the token written in it). The colours
are the app's (``plots.language_colours``, which the Translate tab's strip uses too).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from attnviz.engine.text.token_language import HEURISTIC, LANGUAGE_LABELS, LANGUAGES
from attnviz.plots.language_colours import LANGUAGE_COLOURS

NOTE = "Note: " + HEURISTIC + "."


def _legend(ax, where: str = "upper left") -> None:
    handles = [Patch(facecolor=LANGUAGE_COLOURS[lang], edgecolor="#555555", label=LANGUAGE_LABELS[lang])
               for lang in LANGUAGES]
    ax.legend(handles=handles, loc=where, bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)


def _finish(fig, ax, title: str) -> None:
    """The title, the legend and the heuristic's note under the plot."""
    if title:
        ax.set_title(title, wrap=True)
    _legend(ax)
    fig.text(0.01, 0.01, NOTE, fontsize="x-small", color="#555555", wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))


def draw_language_shares(fig: Figure, shares: np.ndarray, title: str = "") -> None:
    """Stacked bars on ``fig`` (cleared first): per decoder layer (x, from 1), each language's share [L, 5] of the
    steps whose top token it is, in ``LANGUAGES`` order from the bottom."""
    fig.clear()
    ax = fig.add_subplot(1, 1, 1)
    layers = np.arange(1, shares.shape[0] + 1)
    bottom = np.zeros(shares.shape[0])
    for i, lang in enumerate(LANGUAGES):
        ax.bar(layers, shares[:, i], bottom=bottom, color=LANGUAGE_COLOURS[lang], edgecolor="white", linewidth=0.5,
               width=0.85)
        bottom += shares[:, i]
    ax.set_xlim(0.5, shares.shape[0] + 0.5)
    ax.set_ylim(0, 1)
    ax.set_xticks(layers if len(layers) <= 32 else layers[::max(1, len(layers) // 16)])
    ax.set_xlabel("decoder layer (read through the output projection as if it were the last)")
    ax.set_ylabel("share of output steps whose top token is ...")
    _finish(fig, ax, title)


def save_language_shares(path: str, shares: np.ndarray, title: str = "", dpi: int = 150) -> None:
    """Write the stacked bars to ``path``; the format follows the suffix (.png, .svg, .pdf)."""
    fig = Figure(figsize=(max(6.5, 3.0 + 0.28 * shares.shape[0]), 4.5), dpi=dpi)
    draw_language_shares(fig, shares, title)
    fig.savefig(path, bbox_inches="tight", pad_inches=0.15)


def draw_language_strip(fig: Figure, languages: np.ndarray, top_tokens: np.ndarray, steps: Sequence[str],
                        title: str = "") -> None:
    """The layer x step strip on ``fig``: a row per decoder layer (the first at the bottom, as the residual stream
    rises), a column per output step (labelled with the chosen token), each cell coloured by ``languages`` [L, T]
    and holding its top token ``top_tokens`` [L, T]."""
    fig.clear()
    ax = fig.add_subplot(1, 1, 1)
    layers, t = languages.shape
    index = {lang: i for i, lang in enumerate(LANGUAGES)}
    codes = np.vectorize(lambda lang: index.get(str(lang), index["unknown"]), otypes=[int])(languages)
    from matplotlib.colors import ListedColormap

    cmap = ListedColormap([LANGUAGE_COLOURS[lang] for lang in LANGUAGES])
    ax.imshow(codes if codes.size else np.zeros((max(layers, 1), max(t, 1)), dtype=int), cmap=cmap, vmin=0,
              vmax=len(LANGUAGES) - 1, aspect="auto", interpolation="nearest", origin="lower")
    for layer in range(layers):
        for step in range(t):
            ax.text(step, layer, str(top_tokens[layer, step])[:10], ha="center", va="center", fontsize=6)
    ax.set_xticks(range(t), labels=list(steps), rotation=90)
    ax.set_yticks(range(layers), labels=[str(n + 1) for n in range(layers)])
    ax.set_xlabel("output step (the chosen token)")
    ax.set_ylabel("decoder layer")
    _finish(fig, ax, title)


def save_language_strip(path: str, languages: np.ndarray, top_tokens: np.ndarray, steps: Sequence[str],
                        title: str = "", dpi: int = 150) -> None:
    """Write the strip to ``path``; the format follows the suffix (.png, .svg, .pdf)."""
    layers, t = languages.shape
    fig = Figure(figsize=(max(6.5, 3.2 + 0.55 * t), max(3.5, 1.8 + 0.3 * layers)), dpi=dpi)
    draw_language_strip(fig, languages, top_tokens, steps, title)
    fig.savefig(path, bbox_inches="tight", pad_inches=0.15)
