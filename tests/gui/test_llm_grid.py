"""An LLM shaped as the largest ones people translate with on a desktop (28 layers x 32 query heads sharing 16
key/value heads; random, tiny width) in the window: at 1366x768, 1024x700 and 1920x1080 the head grid pages its
layers with readable tiles, names each head's key/value group, and the main map stays the largest view."""

from __future__ import annotations

import pytest

from attnviz.gui.attention.head_grid import MIN_TILE
from tests.folder_samples import write_llm_folder
from tests.gui.conftest import load, translate
from tests.gui.test_map_layout import SIZES, area, sized


@pytest.fixture(scope="module")
def deep_folder(tmp_path_factory):
    return str(write_llm_folder(tmp_path_factory.mktemp("deep") / "llm-28x32-random", d_model=64, layers=28,
                                heads=32, ffn=64))


@pytest.mark.parametrize("size", SIZES)
def test_a_28_by_32_llms_grid_pages_readable_tiles_beside_the_larger_map(qtbot, window, deep_folder, size):
    tab = load(qtbot, window, deep_folder)
    sized(qtbot, window, size)
    translate(qtbot, window, "Zwei Hunde spielen im Schnee.")
    grid, heatmap = tab.attention.grid, tab.attention.heatmap
    qtbot.waitUntil(lambda: grid.shape() == (28, 32), timeout=5000)
    assert grid.tile_size().width() >= MIN_TILE, (size, grid.tile_size(), grid.size())
    assert 1 <= len(grid.shown_layers()) < 28  # a page of layers at a time
    assert "key/value group 16 of 16 (shared by heads 31-32)" in grid.describe(0, 31)
    assert area(heatmap.size()) > 4 * area(grid.size())
