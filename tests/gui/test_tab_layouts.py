"""The Train and Analysis tabs at 1366x768 (issue 25): the curves' axis titles and tick labels are not clipped, the
legend is not drawn over the curves, the empty attention-forming view does not take more height than the charts,
and a long message in the Analysis tab wraps instead of widening its right panel past the window."""

import math

from PySide6.QtCore import QPoint, QRect

from attnviz.gui.train.curves import CurvePlot, Series
from attnviz.gui.worker import JobFailure


def test_the_train_tab_gives_the_charts_their_room(qtbot, window):
    window.resize(1366, 768)
    window.tabs.setCurrentWidget(window.train_tab)
    qtbot.waitUntil(lambda: window.width() == 1366 and window.train_tab.curves.height() > 0)
    tab = window.train_tab
    charts = tab.curves.parentWidget().parentWidget()  # the curves' scroll area
    assert tab.lower_tabs.height() <= charts.height(), (tab.lower_tabs.height(), charts.height())
    assert all(plot.height() >= 140 for plot in tab.curves.plots())


def test_the_legend_and_axis_labels_stay_clear_of_the_curves(qtbot):
    plot = CurvePlot("Training loss", "step", "loss (nats/token)")
    qtbot.addWidget(plot)
    plot.resize(460, 160)
    a, b = plot.add_series(Series("per batch", "#9ecae1", 1.0)), plot.add_series(Series("smoothed", "#2171b5", 2.0))
    for i in range(1, 200):
        a.add(i, 0.0005 * math.exp(-i / 50) + 1e-5)
        b.add(i, 0.0004 * math.exp(-i / 50) + 1e-5)
    plot.grab()  # paints it
    assert not plot.legend_rect.isEmpty() and not plot.legend_rect.intersects(plot._plot)
    widest = max(plot.fontMetrics().horizontalAdvance(label) for _, label in plot._y_ticks(plot._ranges(), 100))
    assert plot._plot.left() >= 20 + widest  # the tick labels fit beside the rotated axis title


def test_a_long_analysis_message_wraps_instead_of_widening_the_panel(qtbot, window):
    window.resize(1366, 768)
    window.tabs.setCurrentWidget(window.analysis_tab)
    tab = window.analysis_tab
    qtbot.waitUntil(lambda: window.width() == 1366)
    before = tab.table.width()
    words = " ".join(f"word{i}" for i in range(120))
    tab._on_worker_failed(JobFailure(ValueError, f"Compare with: the checkpoints differ, {words}"))
    qtbot.wait(50)
    right = tab.pages.mapTo(window, QPoint(tab.pages.width(), 0)).x()
    assert window.width() == 1366 and right <= window.width() and tab.table.width() >= min(before, 300)
    assert tab.head_title.height() > 2 * tab.head_title.fontMetrics().height()  # wrapped onto lines
    assert QRect(QPoint(0, 0), window.size()).contains(tab.pages.geometry())
