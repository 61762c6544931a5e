"""The Translate tab is laid out around its attention map (issue 25): at 1366x768, 1024x700 and 1920x1080, with a
15-token sentence translated, the main map's cells cover at least a fifth of the window and four head-grid tiles;
every label of a 20x20 map is drawn; a 60x60 map gets every label after zooming; one long token does not shrink the
map; the current row's label always shows; the LSTM's single thumbnail is not larger than its map."""

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QRect

from attnviz.gui.attention.head_grid import HeadGrid
from attnviz.gui.attention.heatmap import HeatmapData, HeatmapView
from attnviz.session.attention.layout import FIT_MAX_CELL
from tests.gui.conftest import load, translate

MODELS = Path(__file__).resolve().parents[2] / "models"
SIZES = [(1366, 768), (1024, 700), (1920, 1080)]
SENTENCE = "Ein kleines Mädchen in einem rosa Kleid klettert eine Treppe zu einem Spielhaus hinauf ."  # 15 tokens
WORDS = ("the", "little", "girl", "climbing", "staircase", "playhouse", "<eos>", "dogs", "snow", "in")


def area(size) -> int:
    return size.width() * size.height()


def labels_of(view: HeatmapView, axis: str) -> list[int]:
    return sorted(label.index for label in view.drawn_labels() if label.axis == axis)


def sized(qtbot, window, size):
    window.resize(*size)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == size, timeout=3000)
    return window.translate_tab


def show_map(view: HeatmapView, n: int, highlight: int | None = None, cols: tuple[str, ...] | None = None):
    labels = tuple(f"{WORDS[i % len(WORDS)]}" for i in range(n))
    view.set_data(HeatmapData(np.full((n, n), 1.0 / n, dtype=np.float32), labels, cols or labels, "rows", "cols",
                              "title", highlight))
    view.repaint()
    return labels


@pytest.mark.parametrize("size", SIZES)
def test_the_main_map_is_the_largest_attention_view(qtbot, window, size):
    tab = load(qtbot, window, str(MODELS / "de-en-multi30k.safetensors"))
    sized(qtbot, window, size)
    translate(qtbot, window, SENTENCE)
    assert len(tab.document.encoder.src_tokens) - 2 == 15 and len(tab.document.steps) >= 10  # <sos>, <eos> aside
    heatmap, grid = tab.attention.heatmap, tab.attention.grid
    cells, tile = heatmap.map_rect(), grid.tile_size()
    assert not cells.isEmpty() and not tile.isEmpty()
    assert QRect(QPoint(0, 0), heatmap.size()).contains(cells)  # drawn inside the view, nothing cut off
    assert area(cells) >= 4 * area(tile), (size, cells, tile)
    assert area(cells) >= 0.2 * window.width() * window.height(), (size, cells)
    rows, cols = heatmap.data().matrix.shape
    assert labels_of(heatmap, "row") == list(range(rows)) and labels_of(heatmap, "column") == list(range(cols))
    assert all(not label.elided for label in heatmap.drawn_labels())  # short words shown whole
    # the map is drawn where the window shows it: the scroll area does not hide part of it
    assert heatmap.width() <= tab.attention.heatmap_scroll.viewport().width() + 1


@pytest.mark.parametrize("size", SIZES)
def test_every_label_of_a_20x20_map_is_drawn_and_a_60x60_map_reads_after_zooming(qtbot, loaded, size):
    tab = sized(qtbot, loaded, size)
    translate(qtbot, loaded, "q1 q2 q3")
    panel = tab.attention
    show_map(panel.heatmap, 20)
    assert labels_of(panel.heatmap, "row") == list(range(20)) == labels_of(panel.heatmap, "column"), size
    show_map(panel.heatmap, 60, highlight=7)
    fitted = labels_of(panel.heatmap, "row")
    assert 7 in fitted  # thinned or not, the current row is labelled
    for _ in range(12):
        if panel.heatmap.map_rect().height() >= 60 * 16:
            break
        panel.zoom_in()
    panel.heatmap.repaint()
    cells = panel.heatmap.map_rect()
    assert cells.height() >= 60 * 16 and cells.width() >= 60 * 16  # cells of 16 px or more: a line of text
    assert labels_of(panel.heatmap, "row") == list(range(60)) == labels_of(panel.heatmap, "column")
    scroll = panel.heatmap_scroll
    assert scroll.verticalScrollBar().maximum() > 0 and scroll.horizontalScrollBar().maximum() > 0


def test_a_long_token_is_elided_and_does_not_shrink_the_map(qtbot):
    view = HeatmapView()
    qtbot.addWidget(view)
    view.resize(640, 420)
    labels = show_map(view, 9)
    short = view.map_rect()
    long_cols = labels[:4] + ("blockchain-transaktionen-und-noch-mehr-text",) + labels[5:]
    show_map(view, 9, cols=long_cols)
    cells = view.map_rect()
    assert cells.height() >= 0.8 * short.height() and cells.width() >= 0.8 * short.width(), (short, cells)
    assert cells.height() >= 9 * 16  # every row still labelled
    drawn = {label.index: label for label in view.drawn_labels() if label.axis == "column"}
    assert drawn[4].elided and drawn[4].text.endswith("\u2026") and drawn[4].full == long_cols[4]
    assert not drawn[3].elided
    below = QPoint(drawn[4].rect.center().x(), cells.bottom() + 12)
    assert view.label_at(below) == f"column 5: {long_cols[4]}"  # the full text, for the tooltip


def test_fit_fills_a_wide_view_with_wide_cells(qtbot):
    view = HeatmapView()
    qtbot.addWidget(view)
    view.resize(1000, 300)
    show_map(view, 6)
    cells = view.map_rect()
    assert cells.width() > 1.5 * cells.height()  # not a square in the middle of a wide view
    assert cells.width() >= min(0.6 * view.width(), 6 * FIT_MAX_CELL - 1)  # as wide as the view or the cap allows


def test_a_long_answer_over_a_short_prompt_fills_the_view_with_tall_narrow_cells(qtbot):
    """256 output tokens over a 9-token sentence: square cells would leave a strip 9 cells of 2 px wide."""
    view = HeatmapView()
    qtbot.addWidget(view)
    view.resize(800, 560)
    rows = tuple(f"w{i}" for i in range(256))
    cols = tuple(WORDS[:9])
    view.set_data(HeatmapData(np.full((256, 9), 1 / 9, dtype=np.float32), rows, cols, "rows", "cols", "title", 255))
    view.repaint()
    cells = view.map_rect()
    assert QRect(QPoint(0, 0), view.size()).contains(cells)
    assert cells.width() >= 0.5 * view.width() and cells.height() >= 0.5 * view.height(), cells
    assert labels_of(view, "column") == list(range(9))  # every prompt token still named


def test_the_lstm_thumbnail_is_smaller_than_its_map(qtbot, window):
    tab = load(qtbot, window, str(MODELS / "de-en-lstm-multi30k.safetensors"))
    sized(qtbot, window, (1366, 768))
    translate(qtbot, window, "Zwei Hunde spielen im Schnee .")
    assert tab.attention.grid.shape() == (1, 1)
    cells, tile = tab.attention.heatmap.map_rect(), tab.attention.grid.tile_size()
    assert tile.width() < cells.width() and tile.height() < cells.height()
    assert area(cells) >= 4 * area(tile)


def test_the_head_grid_turns_in_a_narrow_column_and_caps_its_tiles(qtbot):
    grid = HeadGrid()
    qtbot.addWidget(grid)
    grid.resize(150, 600)
    grid.set_maps(np.full((3, 8, 4, 4), 0.25, dtype=np.float32))
    assert grid.transposed  # a column per layer: 3 tiles across, not 8
    assert grid.tile_rect(1, 0).left() > grid.tile_rect(0, 0).left() and grid.tile_rect(0, 1).top() > 0
    assert grid.tile_size().width() >= 30 and grid.heightForWidth(150) <= 600
    grid.resize(800, 800)
    grid.set_maps(np.full((1, 1, 4, 4), 0.25, dtype=np.float32))
    assert grid.tile_size().width() == grid.tile_size().height() <= 120  # a one-head model: still a thumbnail


def test_the_first_window_fits_its_screen_and_a_restored_one_is_clamped(qtbot, settings):
    from PySide6.QtCore import QSize

    from attnviz.gui.main_window import MainWindow, first_size

    assert first_size(QRect(0, 0, 1366, 768)) == QSize(1229, 700)  # a laptop: most of it, never more
    assert first_size(QRect(0, 0, 1920, 1040)) == QSize(1728, 936)
    assert first_size(QRect(0, 0, 1000, 600)) == QSize(1000, 600)
    window = MainWindow(settings)
    qtbot.addWidget(window)
    available = window.screen().availableGeometry()
    assert available.contains(QRect(window.pos(), window.size())), (available, window.geometry())
    window.resize(available.width() + 900, available.height() + 700)
    window.move(available.right() - 50, available.bottom() - 50)
    settings.setValue("window/geometry", window.saveGeometry())  # as if saved on a larger screen
    again = MainWindow(settings)
    qtbot.addWidget(again)
    assert available.contains(QRect(again.pos(), again.size())), (available, again.geometry())



def test_hatched_cells_are_grey_through_with_no_dark_line_between_them(qtbot):
    """Cells at fractional sizes, each hatched on its own, let the map's dark zero show through at their seams."""
    view = HeatmapView()
    qtbot.addWidget(view)
    view.resize(517, 389)  # odd sizes: fractional cells
    n = 13
    future = np.triu(np.ones((n, n), dtype=bool), 1)
    matrix = np.where(future, 0.0, 1.0 / n).astype(np.float32)
    labels = tuple(f"t{i}" for i in range(n))
    view.set_data(HeatmapData(matrix, labels, labels, "rows", "cols", "title", None, masked=future))
    image = view.grab().toImage()
    cells = view.map_rect()
    cw, ch = cells.width() / n, cells.height() / n
    greys = {(150, 150, 150), (110, 110, 110)}
    for i in range(n):
        for j in range(i + 1, n):
            for y in range(int(cells.top() + i * ch) + 1, int(cells.top() + (i + 1) * ch) - 1):
                for x in range(int(cells.left() + j * cw) + 1, int(cells.left() + (j + 1) * cw) - 1):
                    c = image.pixelColor(x, y)
                    assert (c.red(), c.green(), c.blue()) in greys, (i, j, x, y, c.name())
    # and the seams between two hatched cells, where the line was
    for i in range(n - 2):
        y = round(cells.top() + (i + 1) * ch)
        x = round(cells.left() + (n - 1 + 0.5) * cw)
        c = image.pixelColor(x, y)
        assert (c.red(), c.green(), c.blue()) in greys, (i, c.name())
