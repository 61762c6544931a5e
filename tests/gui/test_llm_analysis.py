"""The Analysis tab on a decoder-only LLM folder: head statistics said to be over the whole prompt, the sliding-window
layers and grouped-query groups named, gold alignments scored on the sentence's span; drawn at three sizes."""

from __future__ import annotations

import os

import pytest

from tests.gui.conftest import load

pytest.importorskip("transformers")
from tests.llm_folder import make_llm_folder  # noqa: E402  (needs transformers)

SIZES = ((1366, 768), (1024, 700), (1920, 1080))


def test_llm_head_statistics_and_alignment_in_the_analysis_tab(qtbot, window, tmp_path):
    load(qtbot, window, str(make_llm_folder(tmp_path, "gemma3")))  # window 6 on layers 1 and 3, 2 kv heads
    src, tgt, gold = tmp_path / "src.txt", tmp_path / "tgt.txt", tmp_path / "gold.txt"
    src.write_text("Der Hund läuft .\nEine Katze sieht den Mann .\n")
    tgt.write_text("The dog runs .\nA cat sees the man .\n")
    gold.write_text("0-0 1-1 2-2 3-3\n0-0 1-1 2-2 3-3 4-4 5-5\n")
    tab = window.analysis_tab
    window.tabs.setCurrentWidget(tab)
    tab.set_files(str(src), str(tgt))
    tab.gold.set_path(str(gold))
    tab.run()
    qtbot.waitUntil(lambda: not tab.is_running() and tab.stats is not None and tab.alignment is not None,
                    timeout=60000)
    text, details = tab.thresholds.text(), tab.thresholds.toolTip()
    assert "whole prompt" in text and "windowed layers 1, 3" in text and "kv groups 1-2, 3-4" in text
    assert "sliding-window layers: 1, 3" in details and "kv 1: heads 1, 2; kv 2: heads 3, 4" in details
    assert tab.alignment.aer_heads.shape == (3, 4) and tab.alignment.settings["spans"]
    assert tab.stat_combo.currentData() == "aer" and tab.head_map.data().matrix.shape == (3, 4)
    shots = os.environ.get("ATTNVIZ_SHOTS")
    for width, height in SIZES:
        window.resize(width, height)
        qtbot.wait(50)
        assert tab.head_map.height() >= tab.thresholds.height()  # the map stays the largest view of the page
        if shots:
            window.grab().save(os.path.join(shots, f"llm-analysis-{width}x{height}.png"))
