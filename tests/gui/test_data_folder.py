"""One data folder for the whole window: the Train tab's field, File > Data folder... and the Analysis tab share it,
it is remembered, ATTNVIZ_DATA wins when set, and missing data says how to set it."""

from __future__ import annotations

import os
from pathlib import Path

from attnviz.gui.main_window import MainWindow
from tests.gui.conftest import load

MODEL = str(Path(__file__).resolve().parents[2] / "models" / "de-en-multi30k.safetensors")


def test_the_analysis_tab_reads_the_app_data_folder_and_says_how_to_set_it(qtbot, window, settings, data_dir,
                                                                            tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNVIZ_DATA")  # started as the README says: no environment variable
    load(qtbot, window, MODEL)
    tab, field = window.analysis_tab, window.train_tab.form.data_edit
    empty = tmp_path / "empty"
    empty.mkdir()
    field.setText(str(empty))
    assert tab.data_dir() == str(empty)
    tab.limit_spin.setValue(3)
    with qtbot.waitSignal(tab.worker.failed, timeout=30000):
        tab.run()
    qtbot.waitUntil(lambda: not tab.is_running(), timeout=30000)
    text = tab.head_title.text()
    assert f"missing data in {empty}" in text and "File &gt; Data folder..." in text and "ATTNVIZ_DATA" in text
    window.data_folder.set_path(str(data_dir))  # as File > Data folder... does: no restart
    assert field.text() == str(data_dir)
    tab.run()
    qtbot.waitUntil(lambda: not tab.is_running() and tab.stats is not None, timeout=60000)
    assert len(tab.stats.sentences) == 3
    window.close()
    assert settings.value("data/dir") == str(data_dir)
    again = MainWindow(settings)
    qtbot.addWidget(again)
    assert again.analysis_tab.data_dir() == str(data_dir) == again.train_tab.form.data_dir()


def test_attnviz_data_wins_over_the_remembered_folder(qtbot, settings, tmp_path, monkeypatch):
    settings.setValue("data/dir", str(tmp_path / "remembered"))
    monkeypatch.setenv("ATTNVIZ_DATA", str(tmp_path / "session"))
    window = MainWindow(settings)
    qtbot.addWidget(window)
    assert window.analysis_tab.data_dir() == str(tmp_path / "session") == window.train_tab.form.data_dir()
    monkeypatch.delenv("ATTNVIZ_DATA")
    window = MainWindow(settings)
    qtbot.addWidget(window)
    assert window.analysis_tab.data_dir() == str(tmp_path / "remembered")


def test_a_failed_run_says_where_to_get_the_data_and_shows_no_stale_progress(qtbot, window, tmp_path):
    """After a run that fails for missing data, the bar does not read "0 / 100 sentences" (Size was 20), and the
    message says where the corpus is downloaded: this tab has no Download button."""
    load(qtbot, window, MODEL)
    tab = window.analysis_tab
    empty = tmp_path / "empty"
    empty.mkdir()
    window.data_folder.set_path(str(empty))
    tab.limit_spin.setValue(20)
    assert "100" not in tab.progress.text()  # nothing run yet: no made-up total
    with qtbot.waitSignal(tab.worker.failed, timeout=30000):
        tab.run()
    qtbot.waitUntil(lambda: not tab.is_running(), timeout=30000)
    assert tab.progress.text() == "" and tab.progress.maximum() != 0  # reset, not a busy bar left running
    text = tab.head_title.text()
    assert "attnviz data download multi30k" in text and "Download data in the Train tab" in text
    assert "Download data in the Train tab" in window.statusBar().currentMessage()
    if os.environ.get("ATTNVIZ_SHOTS"):
        window.resize(1024, 700)
        window.tabs.setCurrentWidget(tab)
        qtbot.waitUntil(lambda: window.width() == 1024)
        window.grab().save(os.path.join(os.environ["ATTNVIZ_SHOTS"], "analysis-missing-1024x700.png"))
