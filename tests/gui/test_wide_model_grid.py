"""An NLLB-shaped model (12 layers x 16 heads per kind, random, small vocabulary) in the window: at 1366x768,
1024x700 and 1920x1080 the head grid's tiles reach MIN_TILE (a page of layers, their heads wrapped onto lines where
the column is narrow) while the main map stays the largest view."""

from __future__ import annotations

import pytest

from attnviz.gui.attention.head_grid import MIN_TILE
from tests.folder_samples import write_fairseq_folder
from tests.gui.conftest import load, translate
from tests.gui.test_map_layout import SIZES, area, sized


@pytest.fixture(scope="module")
def wide_folder(tmp_path_factory):
    return str(write_fairseq_folder(tmp_path_factory.mktemp("wide") / "nllb-shaped-random", "nllb", d_model=64,
                                    layers=12, heads=16, ffn=64))


@pytest.mark.parametrize("size", SIZES)
def test_a_12_by_16_models_grid_keeps_readable_tiles_beside_the_larger_map(qtbot, window, wide_folder, size):
    tab = load(qtbot, window, wide_folder)
    sized(qtbot, window, size)
    translate(qtbot, window, "Zwei Hunde spielen im Schnee.")
    grid, heatmap = tab.attention.grid, tab.attention.heatmap
    qtbot.waitUntil(lambda: grid.shape() == (12, 16), timeout=5000)
    tile = grid.tile_size()
    assert tile.width() >= MIN_TILE, (size, tile, grid.size())
    assert len(grid.shown_layers()) >= 1 and len(grid._tiles) == 16 * len(grid.shown_layers())
    assert area(heatmap.size()) > 4 * area(grid.size())  # the map keeps the room; the grid pages instead
