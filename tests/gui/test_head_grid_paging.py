"""A wide model's head grid (NLLB-600M: 12 layers x 16 heads per kind) stays readable: when every layer's tiles would
be smaller than MIN_TILE the grid shows a page of layers at that size at least, says which, and pages by its
arrows, PageUp/PageDown and the cursor; a small model still shows every layer at once."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPoint, Qt

from attnviz.gui.attention.head_grid import MIN_TILE, HeadGrid

WIDE = np.random.default_rng(0).dirichlet(np.ones(9), size=(12, 16, 9)).astype(np.float32)  # [L, H, T, S]


def _grid(qtbot, width, height, maps=WIDE):
    grid = HeadGrid()
    qtbot.addWidget(grid)
    grid.resize(width, height)
    grid.set_maps(maps)
    return grid


def test_a_12_by_16_grid_pages_its_layers_with_readable_tiles(qtbot):
    grid = _grid(qtbot, 260, 420)
    shown = grid.shown_layers()
    assert grid.tile_size().width() >= MIN_TILE and 1 <= len(shown) < 12 and shown.start == 0
    assert {layer for layer, _ in grid._tiles} == set(shown) and len(grid._tiles) == len(shown) * 16
    assert f"Showing layers 1 to {shown.stop}: Page Up and Page Down show the others" in grid.accessible_value()
    qtbot.keyClick(grid, Qt.Key.Key_PageDown)  # the next page; the last one ends at the last layer, never past it
    assert grid.shown_layers() == range(min(shown.stop, 12 - len(shown)), min(shown.stop, 12 - len(shown)) +
                                        len(shown))
    qtbot.keyClick(grid, Qt.Key.Key_PageDown)
    assert grid.shown_layers().stop == 12
    qtbot.mouseClick(grid, Qt.MouseButton.LeftButton, pos=QPoint(10, 5))  # the back arrow of the page bar
    assert grid.shown_layers().stop < 12


def test_the_cursor_and_an_opened_head_turn_the_page(qtbot):
    grid = _grid(qtbot, 260, 420)
    size = len(grid.shown_layers())
    grid.cursor_head = (size - 1, 0)
    qtbot.keyClick(grid, Qt.Key.Key_Right if grid.transposed else Qt.Key.Key_Down)  # to the next layer
    assert grid.cursor_head == (size, 0) and size in grid.shown_layers()
    grid.set_maps(WIDE, current=(0, 3))
    assert 0 in grid.shown_layers()
    opened = []
    grid.selected.connect(lambda layer, head: opened.append((layer, head)))
    tile = grid.tile_rect(grid.shown_layers().start, 5)
    qtbot.mouseClick(grid, Qt.MouseButton.LeftButton, pos=tile.center())
    assert opened == [(grid.shown_layers().start, 5)]


def test_a_small_model_or_a_large_window_shows_every_layer(qtbot):
    small = _grid(qtbot, 320, 420, WIDE[:6, :8])
    assert len(small.shown_layers()) == 6 and "Page Up" not in small.accessible_value()
    large = _grid(qtbot, 1900, 1000)
    assert len(large.shown_layers()) == 12 and large.tile_size().width() >= MIN_TILE


def test_the_height_asked_for_a_paged_grid_holds_a_page_of_readable_tiles(qtbot):
    grid = _grid(qtbot, 240, 300)
    height = grid.heightForWidth(240)
    side, turned, shown = grid.arrangement(240, height)
    assert side >= MIN_TILE and shown < 12


def test_a_layers_heads_wrap_onto_lines_where_one_line_would_be_too_small(qtbot):
    """The 1024x700 window's grid column (140 x 305): one layer's 16 heads in one line would be 12 px; wrapped onto
    two lines of 8 they reach MIN_TILE, every tile inside the grid and none overlapping."""
    grid = _grid(qtbot, 140, 305)
    side, _, shown, lines = grid.plan(140, 305)
    assert grid.tile_size().width() == side >= MIN_TILE and lines == 2 and shown >= 1
    tiles = [grid.tile_rect(layer, h) for layer in grid.shown_layers() for h in range(16)]
    assert all(grid.rect().contains(t) for t in tiles)
    assert not any(a.intersects(b) for i, a in enumerate(tiles) for b in tiles[i + 1:])
    assert [grid.head_label(i) for i in (0, 7)] == ["1/9", "8/16"]
    grid.resize(1900, 1000)  # room enough: one line a layer, as before
    grid.set_maps(WIDE)
    assert grid.lines == 1 and grid.head_label(0) == "H1" and len(grid.shown_layers()) == 12
