"""Exported figures (matplotlib): a long title is wrapped, never clipped at either edge of the file, and masked cells
(future positions a causal query may not see) are hatched grey as the app draws them, not painted as weight zero."""

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import imread

from attnviz.plots.heatmap import MASKED_FACE, draw_heatmap, masked_runs, save_heatmap

TITLE = ("Decoder self-attention · layer 3 · head 5 · step 7/7\nde-en-multi30k: \"Ein Mann mit einem orangefarbenen "
         "Hut, der etwas anstarrt, und noch viel mehr\" · colour scale 0..1")


def causal(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    matrix = np.tril(rng.random((n, n)) + 0.1)
    return matrix / matrix.sum(1, keepdims=True), np.triu(np.ones((n, n), dtype=bool), 1)


def test_masked_runs():
    mask = np.array([[0, 1, 1, 0, 1], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=bool)
    assert list(masked_runs(mask)) == [(0, 1, 2), (0, 4, 1), (2, 0, 5)]


def test_masked_cells_are_hatched_grey():
    matrix, mask = causal(6)
    fig = Figure(figsize=(5, 4))
    FigureCanvasAgg(fig)
    draw_heatmap(fig, matrix, list("abcdef"), list("abcdef"), "query", "key", masked=mask)
    ax = fig.axes[0]
    hatched = [p for p in ax.patches if p.get_hatch()]
    covered = {(int(p.get_y() + 0.5), int(p.get_x() + 0.5) + k) for p in hatched for k in range(int(p.get_width()))}
    assert covered == set(zip(*np.nonzero(mask)))  # exactly the masked cells, each once
    assert all(p.get_facecolor()[:3] == pytest.approx(tuple(int(MASKED_FACE[i:i + 2], 16) / 255 for i in (1, 3, 5)))
               for p in hatched)


def test_per_map_scale_ignores_masked_cells():
    matrix, mask = causal(5)
    fig = Figure()
    draw_heatmap(fig, matrix, list("abcde"), list("abcde"), "q", "k", per_map=True, masked=mask)
    assert fig.axes[0].images[0].get_clim() == (pytest.approx(matrix[~mask].min()), pytest.approx(matrix.max()))


@pytest.mark.parametrize("n", [3, 9])
def test_a_long_title_is_not_clipped(tmp_path, n):
    matrix, mask = causal(n)
    path = tmp_path / "map.png"
    labels = [f"t{i}" for i in range(n)]
    save_heatmap(str(path), matrix, labels, labels, "output step (query)", "decoder input (key)", TITLE, n - 1,
                 False, mask)
    image = imread(path)[..., :3]
    top = image[: image.shape[0] // 5]  # the title's band
    ink = np.flatnonzero((top < 0.5).all(axis=-1).any(axis=0))  # columns where dark text is drawn
    assert ink.size and ink[0] > 2 and ink[-1] < image.shape[1] - 3  # a margin at both edges: nothing cut off


def test_a_signed_map_is_drawn_on_a_diverging_scale_centred_on_zero_with_its_own_label():
    matrix = np.array([[-3.0, 0.5, 2.0], [1.0, -0.25, 0.0]])  # an attribution: negative values and values above 1
    fig = Figure()
    draw_heatmap(fig, matrix, ["a", "b"], list("xyz"), "q", "k", signed=True, value="Integrated gradients")
    image = fig.axes[0].images[0]
    assert image.get_clim() == (-3.0, 3.0) and image.get_cmap().name == "RdBu_r"
    assert fig.axes[1].get_ylabel() == "Integrated gradients"  # the colour bar says what it measures
    draw_heatmap(fig, matrix.clip(0, 1), ["a", "b"], list("xyz"), "q", "k")
    assert fig.axes[0].images[0].get_clim() == (0.0, 1.0) and fig.axes[1].get_ylabel() == "attention weight"
