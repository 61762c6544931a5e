"""Grouped-query attention on the Analysis tab (a decoder-only LLM folder): each table row's key/value head, lines
on the head and importance maps between the groups, the group said on hovering a head, the map's labels clear of
the notes at 1024x700, head importance of an LLM named as its one attention, and the groups kept in a saved file."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from attnviz.gui.analysis.importance import ALL_VIEWS
from attnviz.gui.analysis.llm_notes import group_of, with_kv_column

pytest.importorskip("transformers")
from tests.llm_folder import make_llm_folder  # noqa: E402  (needs transformers)

SIZES = ((1366, 768), (1024, 700), (1920, 1080))


@pytest.fixture()
def corpus(tmp_path):
    src, tgt, gold = tmp_path / "src.txt", tmp_path / "tgt.txt", tmp_path / "gold.txt"
    src.write_text("Der Hund läuft.\nDas Haus ist rot.\n", encoding="utf-8")
    tgt.write_text("The dog runs.\nThe house is red.\n", encoding="utf-8")
    gold.write_text("0-0 1-1 2-2\n0-0 1-1 2-2 3-3\n", encoding="utf-8")
    return str(src), str(tgt), str(gold)


def _load(qtbot, window, folder):
    window.load_model(str(folder))
    qtbot.waitUntil(lambda: window.translator is not None, timeout=60000)
    tab = window.analysis_tab
    window.tabs.setCurrentWidget(tab)
    return tab


def test_the_kv_column_and_the_hover_only_where_heads_share_keys():
    rows = [{"kind": "cross", "layer": 0, "head": h, "entropy": 0.5} for h in range(4)]
    assert with_kv_column(rows, {}) is rows and group_of(3, 0) == ""
    notes = {"kv_heads": 2, "query_heads_per_kv_head": 2, "kv_groups": [[1, 2], [3, 4]]}
    assert list(with_kv_column(rows, notes)[0]) == ["kind", "layer", "head", "kv_head", "entropy"]
    assert [r["kv_head"] for r in with_kv_column(rows, notes)] == [0, 0, 1, 1]
    assert group_of(2, 2) == "; key/value head 2 (shared by heads 3-4)"


def _group_line_is_drawn(head_map, boundary: int) -> bool:
    """A white line with black edges at the left edge of head ``boundary`` (from 0), halfway down the map."""
    head_map.resize(600, 400)
    image = head_map.grab().toImage()
    ratio = image.devicePixelRatio()
    cells = head_map.map_rect()
    x = cells.left() + boundary * cells.width() / head_map.data().matrix.shape[1]
    y = int((cells.top() + cells.height() / 2) * ratio)
    return (image.pixelColor(int(x * ratio), y) == QColor(255, 255, 255)
            and image.pixelColor(int((x - 1.6) * ratio), y) == QColor(0, 0, 0))


def test_statistics_table_and_maps_show_the_groups(qtbot, window, corpus, tmp_path):
    tab = _load(qtbot, window, make_llm_folder(tmp_path, "qwen2"))  # 4 query heads, 2 key/value heads
    tab.set_files(corpus[0], corpus[1])
    tab.gold.set_path(corpus[2])
    tab.run()
    qtbot.waitUntil(lambda: not tab.is_running() and tab.alignment is not None, timeout=60000)
    model = tab.table_model
    columns = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    assert columns[:4] == ["kind", "layer", "head", "kv head"]
    for r in range(model.rowCount()):
        row = model.row(r)
        assert row["kv_head"] == row["head"] // 2
        assert model.data(model.index(r, 3)) == str(row["head"] // 2 + 1)  # shown from 1, as heads are
    assert tab.stat_combo.currentData() == "aer" and tab.head_map.kv_group == 2
    np.testing.assert_allclose(tab.head_map.data().matrix, np.nan_to_num(tab.alignment.aer_heads))
    assert tab.head_map.describe_cell(1, 2).endswith("; key/value head 2 (shared by heads 3-4)")
    page = tab.heads_page
    for size in SIZES:
        window.resize(*size)
        qtbot.wait(50)
        if os.environ.get("ATTNVIZ_SHOTS"):
            window.grab().save(os.path.join(os.environ["ATTNVIZ_SHOTS"], f"llm-kv-heads-{size[0]}x{size[1]}.png"))
        below = [w.geometry().top() for w in (page.head_map.note, page.thresholds, page.head_title) if w.isVisible()]
        assert page.head_map.geometry().bottom() < min(below), size  # the notes never cover the map's labels
    assert _group_line_is_drawn(tab.head_map, 2) and not _group_line_is_drawn(tab.head_map, 1)


def test_importance_names_the_one_attention_and_keeps_the_groups(qtbot, window, corpus, tmp_path):
    tab = _load(qtbot, window, make_llm_folder(tmp_path, "qwen2"))
    panel = tab.importance
    tab.pages.setCurrentWidget(panel)
    tab.set_files(corpus[0], corpus[1])
    panel.compute()
    assert [panel.kind_combo.itemText(i) for i in range(panel.kind_combo.count())] == [ALL_VIEWS]  # while it runs
    qtbot.waitUntil(lambda: not panel.is_running() and panel.result is not None, timeout=120000)
    assert panel.kind_combo.currentText() == ALL_VIEWS and panel.map.data().title.startswith(ALL_VIEWS)
    assert len(panel.result.heads) == 3 * 4 and panel.map.kv_group == 2
    assert _group_line_is_drawn(panel.map, 2)
    if os.environ.get("ATTNVIZ_SHOTS"):
        window.resize(1366, 768)
        window.grab().save(os.path.join(os.environ["ATTNVIZ_SHOTS"], "llm-kv-importance-1366x768.png"))
    saved = tmp_path / "importance.json"
    panel.save_file(str(saved))
    assert json.loads(saved.read_text(encoding="utf-8"))["kv_groups"] == [[1, 2], [3, 4]]
    panel.map.kv_group = 0
    panel.open_file(str(saved))
    assert panel.result.extra["kv_groups"] == [[1, 2], [3, 4]] and panel.map.kv_group == 2
    assert len(panel.result.extra["spans"]) == 2 and "Der Hund läuft." in panel.result.extra["first_prompt"]
    assert panel.kind_combo.currentText() == ALL_VIEWS
