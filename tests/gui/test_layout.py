"""The window fits laptop screens (1280x720, 1024x700) with every control reachable, fills a large screen, and the
heatmap stays legible for long inputs (zoom, scroll, label thinning and elision)."""

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QRect

from attnviz.gui.attention.heatmap import HeatmapData, HeatmapView
from attnviz.session.attention.layout import MAX_LABEL, band_cap, colour_ticks, geometry, label_every, tick_digits
from tests.gui.conftest import translate


def visible_in(widget, window) -> bool:
    """``widget`` is shown and lies entirely inside ``window`` (not pushed off-screen)."""
    top_left = widget.mapTo(window, QPoint(0, 0))
    return widget.isVisible() and window.rect().contains(QRect(top_left, widget.size()))


@pytest.mark.parametrize("size", [(1024, 700), (1280, 720), (2560, 1440)])
def test_both_tabs_fit_and_keep_their_controls_on_screen(qtbot, loaded, size):
    window = loaded
    hint = window.minimumSizeHint()
    assert hint.width() <= 1024 and hint.height() <= 700, hint
    window.resize(*size)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == size, timeout=3000)
    translate(qtbot, window, "q1 q2 q3")
    tab = window.translate_tab
    for widget in (tab.source_edit, tab.translate_button, tab.translation_text, tab.attention.heatmap_scroll,
                   window.statusBar()):
        assert visible_in(widget, window), widget.objectName()
    for widget in (tab.sampling_row.sampling_combo, tab.sampling_row.beam_spin, tab.sampling_row.penalty_spin,
                   tab.search.side, tab.topk_view):
        assert visible_in(widget, window), widget.objectName()
    search = tab.search
    for page, widgets in ((search.panel_scroll, (search.panel.tree_scroll, search.panel.nbest, search.panel.token_edit,
                                                  search.panel.what_if_button, search.panel.prefix_button)),
                          (search.heads_scroll, (search.heads_panel.off_edit, search.heads_panel.rescale_check,
                                                 search.heads_panel.reset_button, search.heads_panel.before_text,
                                                 search.heads_panel.after_text))):
        search.side.setCurrentWidget(page)
        qtbot.wait(20)
        viewport = page.viewport().rect()
        assert not page.verticalScrollBar().isVisible() and not page.horizontalScrollBar().isVisible(), size
        rects = [QRect(w.mapTo(page.viewport(), QPoint(0, 0)), w.size()) for w in widgets]
        for w, rect in zip(widgets, rects):  # on the page, not clipped by it, and not over each other
            assert w.isVisible() and viewport.contains(rect), (size, w.objectName(), rect, viewport)
        assert all(not a.intersects(b) for i, a in enumerate(rects) for b in rects[i + 1:]), (size, rects)
    window.tabs.setCurrentWidget(window.train_tab)
    qtbot.wait(50)
    train = window.train_tab
    for widget in (train.start_button, train.stop_button, train.pause_button, window.statusBar()):
        assert visible_in(widget, window), widget.objectName()
    plots = [p.geometry() for p in train.curves.plots()]
    for i, a in enumerate(plots):  # the four plots never draw over each other
        assert all(not a.intersects(b) for b in plots[i + 1:]), plots
    if size == (2560, 1440):  # a large screen is used, not left empty
        assert train.curves.width() > 1200 and tab.attention.heatmap.width() > 900


def test_label_thinning_and_elision_rules():
    assert label_every(20, 16) == 1 and label_every(8, 16) == 2 and label_every(3, 16) == 6
    g = geometry(800, 600, rows=60, cols=60, row_widths=[30] * 60, col_widths=[400] * 60, line=16,
                 has_title=True, zoom=None)
    assert g.cell < 16 and g.row_every >= 2  # too small to label every row: thinned, not overlapping
    assert g.col_band == band_cap(600) == 120 < MAX_LABEL  # a 400-pixel label is elided to a fifth of the height
    assert g.row_band >= 30  # a short label gets its full width
    z = geometry(800, 600, rows=60, cols=60, row_widths=[30] * 60, col_widths=[30] * 60, line=16,
                 has_title=True, zoom=24)
    assert z.cell == 24 and z.row_every == 1 and z.size(60, 60)[1] > 60 * 24


def test_colour_bar_ticks_have_enough_digits_for_narrow_ranges():
    assert colour_ticks(0.0, 1.0)[0] == 0.0 and colour_ticks(0.0, 1.0)[-1] == 1.0 and len(colour_ticks(0, 1)) >= 4
    ticks = colour_ticks(0.121, 0.127)
    digits = tick_digits(0.121, 0.127)
    labels = [f"{t:.{digits}f}" for t in ticks]
    assert len(set(labels)) == len(labels) >= 3, labels  # distinct labels, not "0.12" five times
    assert tick_digits(0.0, 1.0) == 2


def test_short_labels_are_drawn_in_full(qtbot, monkeypatch):
    drawn = []
    view = HeatmapView()
    qtbot.addWidget(view)
    view.resize(600, 500)
    labels = ("through", "<eos>", "grassy", "a")
    view.set_data(HeatmapData(np.eye(4, dtype=np.float32), labels, labels, "rows", "cols", "title"))
    from PySide6.QtGui import QPainter

    original = QPainter.drawText
    monkeypatch.setattr(QPainter, "drawText", lambda self, *a: (drawn.append(a[-1]), original(self, *a))[1])
    view.grab()
    assert all(drawn.count(label) == 2 for label in labels), drawn  # as a row and as a column, never elided


def test_long_inputs_zoom_scroll_and_keep_full_labels_in_tooltips(qtbot):
    view = HeatmapView()
    qtbot.addWidget(view)
    view.resize(500, 400)
    n = 80
    rows = tuple(f"tok{i}" for i in range(n))
    cols = tuple("a-very-long-token-that-cannot-fit-" + str(i) for i in range(n))
    matrix = np.full((n, n), 1.0 / n, dtype=np.float32)
    view.set_data(HeatmapData(matrix, rows, cols, "rows", "cols", "title"))
    view.show()
    view.repaint()
    assert view._geometry.row_every > 1  # fitted: thinned labels
    below = view._cells.bottom() + 20
    assert view.label_at(QPoint(view._cells.left() + 1, below)) == f"column 1: {cols[0]}"  # full text
    view.set_zoom(24)
    assert view.minimumWidth() > n * 24 and view.minimumHeight() > n * 24  # a scroll area scrolls it
    view.resize(view.minimumSize())
    view.repaint()
    assert view._geometry.row_every == 1 and view._geometry.cell == 24
    view.set_zoom(None)
    assert view.minimumWidth() < 500


def test_zoom_buttons_act_on_the_heatmap(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    panel = tab.attention
    panel.zoom_in()
    assert panel.heatmap.zoom is not None
    first = panel.heatmap.zoom
    panel.zoom_in()
    assert panel.heatmap.zoom > first
    panel.zoom_fit()
    assert panel.heatmap.zoom is None
