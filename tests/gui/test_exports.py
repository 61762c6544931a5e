"""Exported figures carry their context; the head grid and the whole attention panel export as pictures; the
sidecar keeps the sentence as typed."""

import json

from PySide6.QtGui import QImage
from PySide6.QtWidgets import QFileDialog

from tests.gui.conftest import translate


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
    for widget, name in ((tab.attention.grid, "grid.png"), (tab.attention, "panel.png")):
        monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, n=name, **k: (str(tmp_path / n), ""))
        loaded.export_picture(widget, name)
        image = QImage(str(tmp_path / name))
        assert not image.isNull() and image.width() == widget.width()
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(tmp_path / "a.npz"), ""))
    loaded.export_attention()
    sidecar = json.loads((tmp_path / "a.json").read_text())
    assert sidecar["translations"][0]["source"] == "q1 q2 q3" and len(sidecar["translations"][0]["steps"]) == 4
