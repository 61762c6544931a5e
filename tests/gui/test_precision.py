"""File > Precision: the one remembered setting the app loads every model at (the window's --dtype), and a model too
large for the available memory refused in the window with the numbers."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QMenu, QMessageBox

from attnviz.engine.checkpoints import memory
from attnviz.gui.main_window import MainWindow
from attnviz.gui.precision import KEY, precision
from tests.gui.conftest import translate


def _menu(window) -> QMenu:
    return next(m for m in window.findChildren(QMenu) if m.title() == "Prec&ision")


def _action(window, text: str):
    return next(a for a in _menu(window).actions() if a.text().replace("&", "").startswith(text))


def test_the_precision_menu_offers_every_dtype_with_the_remembered_one_checked(window):
    texts = [a.text().replace("&", "") for a in _menu(window).actions()]
    assert texts == ["Automatic (float32 on the CPU; an LLM as stored)", "float32", "float16 (half the memory)",
                     "bfloat16 (half the memory)"]
    assert [a.isChecked() for a in _menu(window).actions()] == [True, False, False, False]
    assert precision(window.settings) == "auto"


def test_choosing_a_precision_reopens_the_model_at_it_and_is_remembered(qtbot, loaded, settings):
    assert loaded.translator.dtype == "float32"
    _action(loaded, "bfloat16").trigger()
    assert settings.value(KEY) == "bfloat16" and _action(loaded, "bfloat16").isChecked()
    qtbot.waitUntil(lambda: loaded.translator is not None and loaded.translator.dtype == "bfloat16", timeout=20000)
    assert loaded.model_label.text().endswith(" parameters · bfloat16 (stored as float32)")
    tab = translate(qtbot, loaded, "q1 q2 q3")
    maps = tab.document.maps("cross", tab.document.current)
    assert maps.dtype == np.float32 and np.allclose(maps.sum(-1), 1.0, atol=1e-3)
    again = MainWindow(settings)  # the next session
    qtbot.addWidget(again)
    assert [a.isChecked() for a in _menu(again).actions()] == [False, False, False, True]


def test_a_model_too_large_for_the_memory_is_refused_with_the_numbers(qtbot, window, toy_checkpoint, tmp_path,
                                                                      monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 1000 kB\nMemAvailable: 100 kB\n")  # the toy model's weights: 179 KiB in float32
    monkeypatch.setattr(memory, "MEMINFO", meminfo)
    shown: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    window.load_model(toy_checkpoint)
    qtbot.waitUntil(lambda: bool(shown), timeout=20000)
    assert window.translator is None
    assert shown[0].endswith("needs 0.2 MiB at float32, 0.1 MiB available; try --dtype bfloat16 (in the app: File > "
                             "Precision).")
