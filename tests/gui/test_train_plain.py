"""The Train tab says what it shows in plain words (issue 25's QA walk at 1366x768): the BLEU axis is "BLEU
(tokenised)", not the metric's key ``bleu_tok``; a step axis has whole steps only, even with one evaluation (whose
axis spans step - 1 .. step + 1); and the hint to start training goes once a run starts."""

import pytest

from attnviz.gui.train.curves import CurvePlot, Series
from attnviz.gui.train.forming import START_HINT
from tests.gui.test_train_tab import TINY, set_settings


def test_the_bleu_axis_is_named_in_plain_words(window):
    curves = window.train_tab.curves
    assert curves.bleu_plot.y_label == "BLEU (tokenised)" and curves.bleu.name == "BLEU (tokenised)"
    assert all("_" not in plot.y_label and all("_" not in s.name for s in plot.series) for plot in curves.plots())


@pytest.mark.parametrize("width", [160, 300, 500, 900, 1800])
@pytest.mark.parametrize("steps", [[10], [7, 9], [1, 2, 3], [100, 5000]])
def test_step_ticks_are_whole_steps(qtbot, width, steps):
    plot = CurvePlot("Validation BLEU", "step", "BLEU")
    qtbot.addWidget(plot)
    series = plot.add_series(Series("bleu", "#000", markers=True))
    for i, step in enumerate(steps):
        series.add(step, 10.0 + i)
    ranges = plot._ranges()
    ticks = plot.x_ticks(ranges, width)
    assert ticks and all(t == int(t) for t in ticks), ticks
    assert all(b > a for a, b in zip(ticks, ticks[1:])) and ranges[0] <= ticks[0] and ticks[-1] <= ranges[1]


def test_the_start_hint_goes_once_a_run_starts(qtbot, window, data_dir, tmp_path):
    tab = window.train_tab
    assert tab.forming.heatmap.placeholder == START_HINT  # before any run
    form = tab.form
    form.preset_combo.setCurrentIndex(form.preset_combo.findData("multi30k-de-en"))
    form.data_edit.setText(str(data_dir))
    form.out_edit.setText(str(tmp_path / "run.safetensors"))
    set_settings(form, TINY)
    tab.start()
    assert tab.is_running()
    assert "Start training" not in tab.forming.heatmap.placeholder and tab.forming.snapshots == []
    qtbot.waitUntil(lambda: not tab.is_running(), timeout=120000)
    assert "Start training" not in tab.forming.heatmap.placeholder
