"""Exported figures carry their context; the head grid and the whole attention panel export as pictures; the
sidecar keeps the sentence as typed."""

import json
from pathlib import Path

from PySide6.QtGui import QImage
from PySide6.QtWidgets import QFileDialog

from tests.gui.conftest import translate
from tests.gui.test_search_view import idle


def test_exports_carry_context_and_cover_grid_and_panel(qtbot, loaded, tmp_path, monkeypatch):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    tab.attention.select(kind="cross", layer=1, head=2)
    title = loaded.figure_title(tab.attention.heatmap.data())
    assert "Cross-attention · layer 2 · head 3" in title and "step 4/4" in title
    assert 'toy: "q1 q2 q3"' in title and "colour scale 0..1" in title
    drawn = []
    monkeypatch.setattr("attnviz.plots.heatmap.save_heatmap", lambda path, *a: drawn.append(a[5]))
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(tmp_path / "v.png"), ""))
    loaded.export_view("png")
    assert drawn == [title]
    for widget, name, what in ((tab.attention.grid, "grid.png", "heads"), (tab.attention, "panel.png", "panel")):
        monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, n=name, **k: (str(tmp_path / n), ""))
        loaded.export_picture(widget, what)
        image = QImage(str(tmp_path / name))
        assert not image.isNull() and image.width() == widget.width()
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(tmp_path / "a.npz"), ""))
    loaded.export_attention()
    sidecar = json.loads((tmp_path / "a.json").read_text())
    assert sidecar["translations"][0]["source"] == "q1 q2 q3" and len(sidecar["translations"][0]["steps"]) == 4


def test_export_dialogs_propose_what_is_in_the_file_in_the_last_folder(qtbot, loaded, tmp_path, monkeypatch):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    tab.attention.select(kind="cross", layer=1, head=2)
    tab.go_to(2)
    asked = []
    folder = tmp_path / "figures"
    folder.mkdir()

    def dialog(parent, caption, start, filters):
        asked.append(start)
        return str(folder / Path(start).name), ""

    monkeypatch.setattr(QFileDialog, "getSaveFileName", dialog)
    loaded.export_view("png")
    loaded.export_picture(tab.attention.grid, "heads")
    tab.attention.select(kind="decoder", layer=0, head=None)
    loaded.export_view("svg")
    loaded.export_attention()
    assert asked[0] == "cross-L2-H3-step3.png"  # no folder yet: the dialog's own
    assert asked[1:] == [str(folder / "cross-heads-step3.png"), str(folder / "dec-L1-mean-step3.svg"),
                         str(folder / "attention-toy-q1-q2-q3.npz")]
    assert all((folder / Path(p).name).exists() for p in asked)
    sidecar = json.loads((folder / "attention-toy-q1-q2-q3.json").read_text())
    assert sidecar["model"]["name"] == "toy" and str(tmp_path) not in json.dumps(sidecar)


def test_the_exported_view_hatches_what_the_app_hatches(qtbot, loaded, tmp_path, monkeypatch):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    tab.attention.select(kind="decoder", layer=0, head=1)
    drawn = []
    monkeypatch.setattr("attnviz.plots.heatmap.save_heatmap", lambda path, *a: drawn.append(a))
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(tmp_path / "v.png"), ""))
    loaded.export_view("png")
    masked = drawn[0][8]
    shown = tab.attention.heatmap.data()
    assert shown.masked is not None and masked is shown.masked and masked.any()
    assert "switched off" not in drawn[0][5]
    tab.search.toggle_head("cross", 1, 2)  # a switched-off head: the grid hatches its tile, the figure the map
    qtbot.waitUntil(lambda: idle(tab) and tab.document.finished, timeout=20000)
    tab.attention.select(kind="cross", layer=1, head=2)
    loaded.export_view("png")
    masked, title = drawn[1][8], drawn[1][5]
    assert masked.shape == tab.attention.heatmap.data().matrix.shape and masked.all()
    assert title.startswith("Cross-attention · layer 2 · head 3 (switched off) · step")
    tab.attention.select(kind="cross", layer=1, head=1)  # its neighbour is on: nothing hatched
    loaded.export_view("png")
    assert drawn[2][8] is None
