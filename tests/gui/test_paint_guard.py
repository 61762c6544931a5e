"""A drawing fault never takes the app down: PySide6 aborts the process when an exception leaves a method Qt calls,
so every paintEvent attnviz writes goes through ``guarded_paint`` (a test reads the source to be sure), which prints
the fault once and draws nothing more."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import attnviz.gui
from attnviz.gui import widgets
from attnviz.gui.attention.heatmap import HeatmapData, HeatmapView
from attnviz.gui.translate.tokens import TokenStrip


def test_every_paint_event_is_guarded():
    unguarded = []
    for path in Path(attnviz.gui.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name == "paintEvent":
                names = {d.id for d in node.decorator_list if isinstance(d, ast.Name)}
                if "guarded_paint" not in names:
                    unguarded.append(f"{path.name}:{node.lineno}")
    assert not unguarded, f"paintEvent without @guarded_paint: {unguarded}"


def test_a_fault_while_drawing_is_said_once_and_the_app_goes_on(qtbot, capsys, monkeypatch):
    view = HeatmapView()
    qtbot.addWidget(view)
    view.resize(300, 200)
    view.set_data(HeatmapData(np.eye(3), ("a", "b", "c"), ("x", "y", "z"), "rows", "cols"))

    def broken(*args):
        raise ValueError("a value nobody foresaw")

    monkeypatch.setattr(view, "_draw_labels", broken)
    monkeypatch.setattr(widgets, "_PAINT_FAULTS", set())  # as in a fresh process
    for _ in range(2):
        assert not view.grab().isNull()  # the process is still here, and Qt has a picture
    err = capsys.readouterr().err
    assert err.count("drawing HeatmapView failed") == 1 and "a value nobody foresaw" in err  # said once


def test_a_shading_without_a_value_draws_as_the_scales_bottom(qtbot):
    strip = TokenStrip("nothing")
    qtbot.addWidget(strip)
    strip.resize(300, 60)
    strip.set_tokens(["a", "b"])
    strip.set_weights([float("nan"), 1.0])  # 0 / 0 in float16: what crashed the app before
    assert not strip.grab().isNull()
