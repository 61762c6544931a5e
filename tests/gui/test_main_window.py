"""The main window end to end, offscreen: loading models, translating, playback, hover, export, errors."""

import os
import subprocess
import sys

import numpy as np
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

from tests.gui.conftest import translate

NAMES = ["sourceEdit", "translateButton", "modelCombo", "outputView", "stepSlider", "playButton",
         "attentionKindCombo", "layerCombo", "headCombo", "heatmapView", "headGrid", "topkView"]


def test_widgets_have_object_and_accessible_names(window):
    from PySide6.QtWidgets import QWidget

    for name in NAMES:
        widget = window.findChild(QWidget, name)
        assert widget is not None, name
        assert widget.accessibleName(), name


def test_translate_shows_every_step_and_all_attention(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    assert tab.output_view.tokens() == ["w3", "w2", "w1", "<eos>"]
    assert tab.source_view.tokens() == ["<sos>", "q1", "q2", "q3", "<eos>"]
    assert tab.playback.slider.maximum() == 3 and tab.playback.slider.value() == 3 and tab.step_model.rowCount() == 4
    panel = tab.attention
    assert [panel.kind_combo.itemData(i) for i in range(panel.kind_combo.count())] == ["encoder", "decoder", "cross"]
    assert panel.layer_combo.count() == 2 and panel.head_combo.count() == 5  # mean + 4 heads
    panel.select(kind="cross", layer=1, head=2)
    data = panel.heatmap.data()
    assert data.matrix.shape == (4, 5) and data.highlight_row == 3
    np.testing.assert_allclose(data.matrix, tab.document.maps("cross", 3)[1, 2])
    assert "query" in data.row_axis and "key" in data.col_axis
    assert len(panel.grid._images) == 2 and len(panel.grid._images[0]) == 4
    assert tab.topk_view._items[0][0] == "<eos>" and tab.topk_view._entropy is not None


def test_scrubbing_back_and_stepping(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    tab.playback.slider.setValue(1)
    assert tab.document.current == 1 and tab.output_view.tokens() == ["w3", "w2"]
    assert tab.attention.heatmap.data().matrix.shape[0] == 2
    tab.playback.step_back()
    assert tab.document.current == 0 and tab.topk_view._items[0][0] == "w3"
    tab.playback.step_forward()
    tab.playback.step_forward()
    assert tab.document.current == 2 and tab.playback.slider.value() == 2


def test_playback_reveals_tokens_one_by_one(qtbot, loaded):
    tab = loaded.translate_tab
    tab.playback.speed_combo.setCurrentText("Very fast")
    seen = []
    render = tab.render_step
    tab.render_step = lambda: (seen.append(tab.document.current), render())
    translate(qtbot, loaded, "q1 q2 q3 q4", instant=False)
    qtbot.waitUntil(lambda: tab.document.current == 4 and not tab.playback.timer.isActive(), timeout=10000)
    assert [c for c in seen if c >= 0] == [0, 1, 2, 3, 4]  # one token at a time
    tab.playback.toggle_play()  # at the end: replays from the start
    assert tab.document.current == 0 and tab.playback.timer.isActive()
    tab.playback.toggle_play()
    assert not tab.playback.timer.isActive()


def test_hovering_tokens_shades_the_other_side(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    tab.attention.select(kind="cross", layer=1, head=None)
    tab.output_view.hovered.emit(0)
    row = tab.document.cross_row(0, 1, None)
    np.testing.assert_allclose(tab.source_view._weights, row / row.max(), rtol=1e-6)
    tab.source_view.hovered.emit(3)
    column = tab.document.cross_column(3, tab.document.current, 1, None)
    np.testing.assert_allclose(tab.output_view._weights, column / column.max(), rtol=1e-6)
    rect = tab.output_view._rects[1]
    qtbot.mouseMove(tab.output_view, rect.center())
    qtbot.waitUntil(lambda: tab.source_view._weights is not None)


def test_grid_click_opens_that_head(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2")
    tile = tab.attention.grid._tiles[(1, 3)]
    qtbot.mouseClick(tab.attention.grid, Qt.MouseButton.LeftButton, pos=tile.center())
    assert (tab.attention.layer, tab.attention.head) == (1, 3)


def test_heatmap_tooltip_cell_lookup(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2")
    view = tab.attention.heatmap
    view.repaint()
    cells = view._cells
    row, col = view.cell_at(QPoint(cells.left() + 1, cells.bottom() - 1))
    assert row == view.data().matrix.shape[0] - 1 and col == 0


def test_empty_input_and_no_model_give_inline_messages(qtbot, window, loaded):
    tab = loaded.translate_tab
    tab.source_edit.setText("   ")
    tab.translate()
    assert tab.message.isVisible() and "Type a sentence" in tab.message.text() and tab.document.request is None


def test_a_new_request_cancels_the_running_one(qtbot, loaded):
    tab = loaded.translate_tab
    tab.playback.instant_check.setChecked(True)
    tab.source_edit.setText("q1 q2 q3 q4 q5")
    tab.translate()
    tab.source_edit.setText("q7")
    tab.translate()
    qtbot.waitUntil(lambda: tab.document.finished, timeout=20000)
    qtbot.wait(200)
    assert tab.source_view.tokens() == ["<sos>", "q7", "<eos>"] and tab.output_view.tokens() == ["w7", "<eos>"]


def test_a_bad_checkpoint_shows_the_engine_message_and_keeps_the_model(qtbot, loaded, tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    before = loaded.translator
    bad = tmp_path / "bad.safetensors"
    bad.write_text("garbage")
    loaded.load_model(str(bad))
    qtbot.waitUntil(lambda: bool(shown), timeout=20000)
    assert "not a safetensors file" in shown[0] and "current model stays loaded" in shown[0]
    assert loaded.translator is before


def test_exports(qtbot, loaded, tmp_path, monkeypatch):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    for name in ("view.png", "view.svg", "att.npz"):
        monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, n=name: (str(tmp_path / n), ""))
        if name.endswith("npz"):
            loaded.export_attention()
        else:
            loaded.export_view(name.rsplit(".", 1)[1])
        assert (tmp_path / name).stat().st_size > 500
    assert (tmp_path / "view.png").read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in (tmp_path / "view.svg").read_bytes()[:500]
    data = np.load(tmp_path / "att.npz")
    assert data["cross"].shape == (2, 4, 4, 5) and (tmp_path / "att.json").exists()
    assert tab.current_translation().tokens == ("w3", "w2", "w1", "<eos>")


def test_settings_remember_the_model_and_recent_files(qtbot, loaded, settings, toy_checkpoint):
    loaded.close()
    assert settings.value("models/last") == toy_checkpoint
    assert toy_checkpoint in loaded.recent_files()
    assert settings.value("window/geometry") is not None


def test_gui_modules_import_without_torch_or_spacy():
    code = ("import sys, attnviz.gui.main_window, attnviz.gui.app; "
            "print(sorted(m for m in ('torch', 'spacy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_a_bundled_model_opened_by_a_relative_path_stays_bundled(qtbot, window, settings, monkeypatch):
    from attnviz.session.model_list import bundled_models

    names = bundled_models()[-1].path  # any bundled file, named relative to its folder's parent
    monkeypatch.chdir(os.path.dirname(os.path.dirname(names)))
    window.load_model(os.path.join("models", os.path.basename(names)))
    qtbot.waitUntil(lambda: window.translator is not None, timeout=20000)
    assert settings.value("models/last") == names and window.recent_files() == []
    assert window.model_combo.currentData() == names and not window.model_combo.currentText().startswith("Recent")


def test_a_named_pipe_is_refused_at_once_and_closing_never_waits_on_it(qtbot, loaded, tmp_path, monkeypatch):
    import threading

    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    unblock = threading.Timer(25, lambda: open(fifo, "wb").close())  # a regression must not hang the test run
    unblock.daemon = True
    unblock.start()
    try:
        loaded.load_model(str(fifo))
        qtbot.waitUntil(lambda: bool(shown), timeout=20000)
    finally:
        unblock.cancel()
    assert "is a named pipe" in shown[0] and not loaded.loader.is_running()
    assert loaded.loader.wait(1000)


def test_a_worker_stuck_at_close_is_kept_alive_instead_of_destroyed(qtbot):
    import threading

    from attnviz.gui import worker as worker_module

    release = threading.Event()

    def stuck(stop):
        release.wait(30)  # stands for a system call that ignores the stop flag
        yield from ()

    w = worker_module.Worker()
    w.start(stuck)
    qtbot.waitUntil(w.is_running, timeout=5000)
    w.cancel()
    assert not w.wait(50)
    assert worker_module.any_stuck()  # kept, with its runner, so dropping the worker frees nothing in its thread
    release.set()
    for thread, _ in worker_module.STUCK:
        thread.join(5)
    assert not worker_module.any_stuck()
    worker_module.STUCK.clear()


def test_quit_is_the_file_menus_last_entry_after_a_separator(window):
    file_menu = window.menuBar().actions()[0].menu()
    actions = file_menu.actions()
    assert actions[-1].text() == "&Quit" and actions[-2].isSeparator()
    assert "&Copy translation" in [a.text() for a in actions[:-2]]


def test_a_long_status_message_is_elided_before_the_model_label_whole_in_its_tooltip(qtbot, window):
    window.resize(1024, 700)
    window.show()
    qtbot.waitExposed(window)
    bar = window.statusBar()
    long = "Translated: 256 tokens. " + "Stopped at the length limit of 256 tokens: raise Max length. " * 4
    bar.showMessage(long)
    assert bar.currentMessage() == long  # the text itself is kept whole
    shown, room = bar.shown_message(), bar.message_room()
    assert shown.endswith("\u2026") and long.startswith(shown[:-1]) and bar.toolTip() == long
    assert room.right() < window.model_label.geometry().left()  # never under the model's summary
    assert bar.fontMetrics().horizontalAdvance(shown) <= room.width()
    bar.showMessage("Model ready")
    assert bar.shown_message() == "Model ready" and bar.toolTip() == ""
