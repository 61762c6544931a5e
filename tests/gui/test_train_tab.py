"""The Train tab on a small slice of real Multi30k: curves, evaluations, pause/resume, stop, resume, validation."""

import csv
import json

import numpy as np
import pytest
import torch
from PySide6.QtWidgets import QMessageBox

from attnviz.engine.loading import load_translator
from attnviz.gui.train.curves import CurvePlot, Series, nice_ticks
from attnviz.gui.train.forming import row_entropy
from attnviz.gui.train.recipe_form import parse_value

TINY = {"train.epochs": "3", "corpus.limit": "300", "model.d_model": "32", "model.ff_dim": "64", "model.heads": "2",
        "model.enc_layers": "1", "model.dec_layers": "1", "train.batch_size": "32", "train.lr": "0.003",
        "train.bleu_sentences": "20", "train.threads": "1"}


def set_settings(form, values: dict[str, str]) -> None:
    for row in range(form.table.rowCount()):
        key = form.table.item(row, 0).text()
        if key in values:
            form.table.item(row, 1).setText(values[key])


@pytest.fixture()
def tab(window, data_dir, tmp_path):
    tab = window.train_tab
    window.tabs.setCurrentWidget(tab)
    form = tab.form
    form.preset_combo.setCurrentIndex(form.preset_combo.findData("multi30k-de-en"))
    form.data_edit.setText(str(data_dir))
    form.out_edit.setText(str(tmp_path / "run.safetensors"))
    set_settings(form, TINY)
    assert form.is_valid(), form.error_label.text()
    return tab


def test_start_gives_curves_an_evaluation_row_and_attention_frames(qtbot, tab, tmp_path):
    assert "1 process" in tab.device_label.text() and "--nproc" in tab.device_label.toolTip()
    tab.start()
    qtbot.waitUntil(lambda: not tab.is_running(), timeout=120000)
    assert tab.message.isHidden(), tab.message.text()
    used = "cuda" if torch.cuda.is_available() else "cpu"  # the recipe's device is auto
    assert tab.device_label.text() == f"Device: {used} · 1 process"
    steps = tab.curves.raw_loss.xs
    assert steps == sorted(steps) and len(steps) == tab.total_steps > 0
    assert tab.curve_updates >= 1
    assert tab.eval_table.rowCount() == 3  # one evaluation per epoch
    losses = [float(tab.eval_table.item(r, 2).text()) for r in range(3)]
    assert losses[-1] < losses[0]  # validation loss falls
    ppl = float(tab.eval_table.item(2, 3).text())
    assert ppl == pytest.approx(np.exp(losses[-1]), rel=1e-2)
    assert len(tab.forming.snapshots) == 3
    cross = tab.forming.snapshots[-1].probe.attention["cross"]
    assert np.allclose(cross.sum(-1), 1.0, atol=1e-4)
    assert tab.forming.strip._images and len(tab.forming.strip._images) == 3
    assert (tmp_path / "run.safetensors").exists() and tab.open_best_button.isEnabled()
    tab.eval_table.selectRow(1)
    assert "Reference" in tab.samples_view.toHtml()


def test_pause_stops_steps_and_resume_continues(qtbot, tab):
    set_settings(tab.form, {"train.epochs": "50"})
    tab.start()
    qtbot.waitUntil(lambda: len(tab.curves.raw_loss.xs) >= 5, timeout=60000)
    tab.toggle_pause()
    assert tab.pause_button.text() == "Res&ume"
    qtbot.wait(600)  # let the step in flight arrive
    paused_at = len(tab.curves.raw_loss.xs) + len(tab.run.pending)
    qtbot.wait(1000)
    assert len(tab.curves.raw_loss.xs) + len(tab.run.pending) <= paused_at + 1
    tab.toggle_pause()
    qtbot.waitUntil(lambda: len(tab.curves.raw_loss.xs) > paused_at + 3, timeout=30000)
    assert tab.stop_and_wait(30000)  # every test that trains stops its run, within a bound


def test_stop_saves_a_checkpoint_that_translate_loads_and_resume_continues(qtbot, window, tab, tmp_path):
    set_settings(tab.form, {"train.epochs": "50"})
    tab.start()
    qtbot.waitUntil(lambda: len(tab.curves.raw_loss.xs) >= 5, timeout=60000)
    assert tab.stop_and_wait(20000)
    last = tmp_path / "run.last.safetensors"
    assert last.exists() and (tmp_path / "run.state.safetensors").exists()
    stopped_step = load_translator(last).metadata["step"]
    assert stopped_step >= 5 and "Stopped at step" in tab.progress_label.text()
    tab.open_last_button.click()
    qtbot.waitUntil(lambda: window.translator is not None, timeout=20000)
    assert window.tabs.currentWidget() is window.translate_tab
    assert window.translator.metadata["path"] == str(last)

    tab.resume_run(str(last))
    qtbot.waitUntil(lambda: bool(tab.curves.raw_loss.xs), timeout=60000)
    qtbot.waitUntil(lambda: len(tab.curves.raw_loss.xs) > stopped_step, timeout=60000)
    xs = tab.curves.raw_loss.xs  # the stopped run's steps come back, then the new ones follow on
    assert xs[:stopped_step + 1] == list(range(1, stopped_step + 2))
    assert tab.stop_and_wait(30000)


def test_bad_hyperparameters_are_refused_before_training(qtbot, tab):
    set_settings(tab.form, {"train.lr": "-1"})
    assert not tab.form.is_valid() and not tab.start_button.isEnabled()
    assert "lr must be positive" in tab.form.error_label.text()
    set_settings(tab.form, {"train.lr": "0.003", "model.heads": "3"})
    assert "divisible by heads" in tab.form.error_label.text()
    set_settings(tab.form, {"model.heads": "2", "train.epochs": "many"})
    assert tab.form.error_label.text() == "train.epochs must be a whole number, not 'many'"
    tab.start()
    assert not tab.is_running()
    set_settings(tab.form, {"train.epochs": "3"})
    assert tab.form.is_valid() and tab.start_button.isEnabled()


def test_warmup_is_greyed_out_for_a_schedule_without_one(qtbot, tab):
    form = tab.form
    row = next(r for r in range(form.table.rowCount()) if form.table.item(r, 0).text() == "train.warmup")
    item = form.table.item(row, 1)
    set_settings(form, {"train.schedule": "noam"})
    assert item.toolTip() == "" and form.is_valid()
    set_settings(form, {"train.schedule": "one_cycle"})
    assert item.toolTip() == "not used: the 'one_cycle' schedule has no warm-up steps"
    assert item.foreground().color().name() == "#808080" and form.is_valid()


def test_missing_data_names_the_download(qtbot, tab, tmp_path):
    tab.form.data_edit.setText(str(tmp_path / "empty"))
    tab.start()
    assert not tab.is_running()
    assert "attnviz data download multi30k" in tab.message.text()
    assert tab.download_button.isVisible()


def test_closing_while_training_stops_and_saves(qtbot, window, tab, tmp_path, monkeypatch):
    import attnviz.gui.main_window as main_window

    set_settings(tab.form, {"train.epochs": "50"})
    tab.start()
    qtbot.waitUntil(lambda: len(tab.curves.raw_loss.xs) >= 3, timeout=60000)
    monkeypatch.setattr(main_window, "NO_USER_PLATFORMS", frozenset())  # as on a screen, where a person answers
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.No)
    quit_action = next(a for m in window.menuBar().actions() for a in m.menu().actions() if a.text() == "&Quit")
    quit_action.trigger()  # File > Quit: a person asked, so a person is asked
    assert window.isVisible() and tab.is_running()  # "No" keeps training
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    window.quit_by_user()
    assert not tab.is_running() and not window.isVisible()
    assert load_translator(tmp_path / "run.last.safetensors").metadata["step"] >= 3


def test_a_close_nobody_can_answer_stops_and_saves_without_asking(qtbot, window, tab, tmp_path, monkeypatch):
    def no_modal(*args, **kwargs):
        raise AssertionError("a modal question while nobody can answer")

    set_settings(tab.form, {"train.epochs": "50"})
    tab.start()
    qtbot.waitUntil(lambda: len(tab.curves.raw_loss.xs) >= 3, timeout=60000)
    monkeypatch.setattr(QMessageBox, "question", no_modal)
    monkeypatch.setattr(QMessageBox, "warning", no_modal)
    window.quit_by_user()  # on the offscreen platform: no screen, nobody to ask
    assert not tab.is_running() and not window.isVisible()
    assert load_translator(tmp_path / "run.last.safetensors").metadata["step"] >= 3


def test_sigterm_closes_the_window_through_its_close_path(qtbot, window, tab, tmp_path):
    import os
    import signal

    from attnviz.gui.app import close_on_signals

    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        close_on_signals(window)
        set_settings(tab.form, {"train.epochs": "50"})
        tab.start()
        qtbot.waitUntil(lambda: len(tab.curves.raw_loss.xs) >= 3, timeout=60000)
        os.kill(os.getpid(), signal.SIGTERM)  # a quit from a signal: nobody to answer, training saved
        qtbot.waitUntil(lambda: not window.isVisible(), timeout=30000)
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)
    assert not tab.is_running()
    assert load_translator(tmp_path / "run.last.safetensors").metadata["step"] >= 3


def test_curves_export_png_svg_csv(qtbot, window, tmp_path):
    curves = window.train_tab.curves
    for step in range(1, 30):
        curves.raw_loss.add(step, 5.0 / step)
    curves.add_evaluation(10, 2.5, 12.0)
    for suffix in ("png", "svg", "csv"):
        curves.export(tmp_path / f"curves.{suffix}")
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert "<svg" in (tmp_path / "curves.svg").read_text()
    rows = list(csv.reader(open(tmp_path / "curves.csv")))
    assert rows[0] == ["plot", "series", "step", "value"]
    assert ["Validation BLEU", "BLEU (tokenised)", "10.0", "12.0"] in rows
    assert sum(r[0] == "Training loss" for r in rows) == 29


def test_plot_hover_finds_the_nearest_point(qtbot):
    plot = CurvePlot("t", "step", "loss")
    qtbot.addWidget(plot)
    series = plot.add_series(Series("s", "#000"))
    for x in range(10):
        series.add(x, x * x)
    plot.resize(400, 300)
    plot.grab()  # lays out the plot area
    r = plot._ranges()
    hit = plot.nearest(plot._map(3, 9, r))
    assert hit is not None and hit[1:] == (3.0, 9.0)


def test_nice_ticks_and_entropy():
    assert nice_ticks(0, 10, 5) == [0, 2, 4, 6, 8, 10]
    assert nice_ticks(0.0013, 0.0049, 4) == pytest.approx([0.002, 0.003, 0.004])
    uniform = np.full((3, 4), 0.25)
    sharp = np.eye(3, 4)
    assert row_entropy(uniform) == pytest.approx(np.log(4))
    assert row_entropy(sharp) == pytest.approx(0.0, abs=1e-9)


def test_parse_value_follows_the_preset_type():
    assert parse_value("train.epochs", " 12 ", 10) == 12
    assert parse_value("train.lr", "1e-3", 5e-4) == 1e-3
    assert parse_value("train.save_epochs", "True", False) is True
    assert parse_value("train.betas", json.dumps([0.9, 0.98]), (0.9, 0.999)) == [0.9, 0.98]
    with pytest.raises(Exception, match="train.save_epochs must be true or false"):
        parse_value("train.save_epochs", "yes", False)
