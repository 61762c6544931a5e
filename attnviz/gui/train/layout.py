"""How the Train tab is laid out: the recipe form and run buttons on the left; the progress, the curves and the
lower tabs (attention forming, evaluations) on the right. Each pane scrolls instead of imposing its minimum size on
the window, so the tab fits 1024x700 and a 1366x768 laptop."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QSplitter, QTabWidget, QVBoxLayout, QWidget

from attnviz.gui.widgets import scrolled


def _settings_pane(tab) -> QWidget:
    buttons = QHBoxLayout()
    for b in (tab.start_button, tab.pause_button, tab.stop_button):
        buttons.addWidget(b)
    more = QHBoxLayout()
    for b in (tab.resume_button, tab.download_button):
        more.addWidget(b)
    opens = QHBoxLayout()
    for b in (tab.open_best_button, tab.open_last_button):
        opens.addWidget(b)
    left = QWidget()
    left.setObjectName("trainSettings")
    left_layout = QVBoxLayout(left)
    left_layout.addWidget(tab.form, 1)
    left_layout.addLayout(buttons)
    left_layout.addLayout(more)
    left_layout.addLayout(opens)
    return left


def _progress_pane(tab) -> QWidget:
    curve_bar = QHBoxLayout()
    curve_bar.addWidget(tab.progress, 1)
    curve_bar.addWidget(tab.log_check)
    curve_bar.addWidget(tab.export_button)
    tab.lower_tabs = QTabWidget()
    tab.lower_tabs.setObjectName("trainLowerTabs")
    tab.lower_tabs.addTab(scrolled(tab.forming), "Attention form&ing")
    tab.lower_tabs.addTab(tab.evaluations, "E&valuations")
    upper = QWidget()
    upper_layout = QVBoxLayout(upper)
    upper_layout.setContentsMargins(0, 0, 0, 0)
    upper_layout.addLayout(curve_bar)
    upper_layout.addWidget(tab.progress_label)
    upper_layout.addWidget(tab.device_label)
    upper_layout.addWidget(tab.message)
    upper_layout.addWidget(scrolled(tab.curves), 1)
    right = QSplitter(Qt.Orientation.Vertical)
    right.addWidget(upper)
    right.addWidget(tab.lower_tabs)
    right.setStretchFactor(0, 3)
    right.setStretchFactor(1, 2)
    # the curves first: four charts need the height to show their axes; the forming view (empty until the first
    # evaluation) used to take twice theirs
    right.setSizes([600, 400])
    right.setChildrenCollapsible(False)
    return right


def lay_out(tab) -> None:
    """Place the Train tab's widgets: settings on the left, curves over the lower tabs on the right."""
    splitter = QSplitter(Qt.Orientation.Horizontal)
    splitter.setObjectName("trainSplitter")
    splitter.addWidget(scrolled(_settings_pane(tab)))
    splitter.addWidget(_progress_pane(tab))
    splitter.setStretchFactor(0, 0)
    splitter.setStretchFactor(1, 1)
    splitter.setSizes([400, 880])
    splitter.setChildrenCollapsible(False)
    layout = QVBoxLayout(tab)
    layout.addWidget(splitter)

