"""A decoder-only LLM folder in the Translate tab: its views named as what they are, the prompt's axis cut to the
sentence (or the whole prompt a click away), template and instruction tokens marked, grouped-query heads named, a
head switched off in any view off in every pass, sliding-window cells hatched, the kept maps' size said."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from tests.gui.conftest import load, translate

pytest.importorskip("transformers")
from tests.llm_folder import make_llm_folder  # noqa: E402  (needs transformers)

SENTENCE = "Der Mann sieht den Hund."


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    return make_llm_folder(tmp_path_factory.mktemp("qwen"), "qwen2")


def test_the_map_shows_the_output_over_the_sentence_and_the_whole_prompt_a_click_away(qtbot, window, qwen):
    tab = load(qtbot, window, str(qwen))
    statuses: list[str] = []
    window.statusBar().messageChanged.connect(statuses.append)
    translate(qtbot, window, SENTENCE)
    panel, bar, encoder = tab.attention, tab.quantity.bar, tab.document.encoder
    assert [panel.kind_combo.itemText(i) for i in range(panel.kind_combo.count())] == \
        ["Output \u2192 prompt", "Output \u2192 own output", "Prompt self-attention"]
    assert panel.kind == "cross" and bar.span_check.isVisible() and bar.span_check.isChecked()
    a, b = encoder.span
    assert set(encoder.roles[a:b]) == {"source"} and "template" in encoder.roles and "instruction" in encoder.roles
    panel.select(head=0)
    shown = panel.heatmap.data()
    assert shown is not None and len(shown.cols) == b - a  # the sentence's own tokens only...
    np.testing.assert_allclose(shown.matrix.sum(-1), 1, atol=1e-5)  # ... each row renormalised over them, and said
    assert "renormalised over the sentence's tokens" in panel.caption.text()
    # the Source strip folds the template's and the instruction's runs into one chip each
    chips = tab.source_view.tokens()
    runs = sum(1 for i, r in enumerate(encoder.roles) if r != "source" and (i == 0 or encoder.roles[i - 1] != r))
    assert len(chips) == b - a + runs and chips[chips.index(encoder.src_tokens[a]):][:b - a] == \
        list(encoder.src_tokens[a:b])
    assert any(c.startswith("template\u00d7") for c in chips) and any(c.startswith("instruction\u00d7") for c in chips)
    bar.span_check.setChecked(False)
    assert len(panel.heatmap.data().cols) == len(encoder.src_tokens)  # the whole prompt, as the model weighs it
    assert "one softmax" in panel.caption.text() and tab.source_view.tokens() == list(encoder.src_tokens)
    whole = panel.heatmap.data().matrix[:, a:b]
    np.testing.assert_allclose(whole / whole.sum(-1, keepdims=True), shown.matrix, atol=1e-5)
    assert "The sentence:" in tab.source_view.accessible_value()  # the strip marks the template apart
    assert any("Attention kept:" in s and "float16" in s for s in statuses)


def test_grouped_heads_are_named_and_a_head_off_in_one_view_is_off_in_all(qtbot, window, qwen):
    tab = load(qtbot, window, str(qwen))
    translate(qtbot, window, SENTENCE)
    grid = tab.attention.grid
    assert grid.kv_heads == 2 and "key/value group 2 of 2 (shared by heads 3-4)" in grid.describe(0, 2)
    tab.attention.head_toggled.emit("cross", 1, 2)
    qtbot.waitUntil(lambda: tab.document.finished and bool(tab.search.heads_off), timeout=30000)
    qtbot.waitUntil(lambda: tab.document.finished, timeout=30000)
    for kind in ("cross", "decoder", "encoder"):
        maps = tab.document.maps(kind, -1)
        assert maps is not None and np.all(maps[1, 2] == 0) and not np.all(maps[1, 1] == 0)
    tab.attention.select(kind="decoder")
    assert (1, 2) in grid.off  # crossed out in every view


def test_cells_outside_a_sliding_window_are_hatched(qtbot, window, tmp_path):
    tab = load(qtbot, window, str(make_llm_folder(tmp_path, "mistral")))  # every layer slides, window 6
    translate(qtbot, window, SENTENCE)
    tab.quantity.bar.span_check.setChecked(False)
    tab.attention.select(kind="encoder")
    data = tab.attention.heatmap.data()
    assert data is not None and data.outside is not None and data.outside.any()
    assert np.all(data.matrix[data.outside] == 0)
    i, j = map(int, np.argwhere(data.outside)[0])
    assert "sliding window" in tab.attention.heatmap.describe_cell(i, j)
    # the grid's small maps stripe the same cells grey (no colour of the scale is grey), and say so in the caption
    from attnviz.gui.attention.colormap import HIDDEN_GREY, HIDDEN_STRIPE

    image = tab.attention.grid._images[0][0]
    pixel = image.pixelColor(j, i)
    assert (pixel.red(), pixel.green(), pixel.blue()) in (HIDDEN_GREY, HIDDEN_STRIPE)
    inside = np.argwhere(~data.outside)[0]
    seen = image.pixelColor(int(inside[1]), int(inside[0]))
    assert (seen.red(), seen.green(), seen.blue()) not in (HIDDEN_GREY, HIDDEN_STRIPE)
    assert "small maps lie outside their layer's sliding window" in tab.attention.caption.text()


def test_mnemonics_stay_unique_with_an_llms_controls_shown(qtbot, window, qwen):
    from attnviz.gui.shortcuts import clashes
    from tests.gui.test_keyboard import window_states

    tab = load(qtbot, window, str(qwen))
    assert tab.quantity.bar.span_check.isVisibleTo(window)
    for state in window_states(window):
        assert not clashes(window), (state, clashes(window))


def test_a_beam_search_of_an_llm_forms_the_engines_tree(qtbot, window, qwen):
    from attnviz.engine.config import DecodeConfig
    from attnviz.engine.events import BeamStep
    from tests.gui.test_search_view import decode

    load(qtbot, window, str(qwen))
    window.translate_tab.playback.max_len_spin.setValue(5)
    tab = decode(qtbot, window, SENTENCE, mode="beam", width=3)
    events = list(window.translator.beam_steps(SENTENCE, DecodeConfig(beam=3, max_len=5)))
    engine = {n.id: n.status for e in events if isinstance(e, BeamStep) for n in e.nodes}
    assert {i: n.status for i, n in tab.document.tree.nodes.items()} == engine
    assert set(tab.search.panel.tree_view.node_ids()) == set(engine)


def test_the_llm_prompt_is_set_from_the_file_menu_remembered_and_refused_when_bad(qtbot, window, qwen, monkeypatch):
    from PySide6.QtWidgets import QInputDialog

    from attnviz.gui.prompt_menu import KEY, edit_prompt

    tab = load(qtbot, window, str(qwen))
    assert window.prompt_action.isEnabled()
    monkeypatch.setattr(QInputDialog, "getMultiLineText", lambda *a: ("{src_lang}: {text}\n{tgt_lang}:", True))
    before = window.translator
    edit_prompt(window)
    assert window.translator is not before and "Translate the following text" in before.prompt_template  # a view
    assert tab.translator is window.translator
    assert window.settings.value(KEY) == "{src_lang}: {text}\n{tgt_lang}:"
    translate(qtbot, window, SENTENCE)
    assert "German: Der Mann" in "".join(tab.document.encoder.src_tokens).replace("\u2581", " ")
    assert "Translate" not in "".join(tab.document.encoder.src_tokens)  # the default instruction is gone
    monkeypatch.setattr(QInputDialog, "getMultiLineText", lambda *a: ("no field", True))
    messages: list[str] = []
    window.statusBar().messageChanged.connect(messages.append)
    edit_prompt(window)
    assert any("exactly once" in m for m in messages) and window.settings.value(KEY) != "no field"


def test_a_remembered_prompt_that_no_longer_reads_is_set_aside_and_said(qtbot, window, qwen):
    from attnviz.gui.prompt_menu import KEY

    window.settings.setValue(KEY, "{text} {nonsense}")
    messages: list[str] = []
    window.statusBar().messageChanged.connect(messages.append)
    load(qtbot, window, str(qwen))
    assert window.settings.value(KEY) is None and any("set aside" in m for m in messages)
    assert "Translate the following text" in window.translator.prompt_template  # the default instead


@pytest.mark.parametrize("key", ["alti-plus", "value-zeroing"])
def test_alti_and_value_zeroing_are_offered_and_fill_the_map(qtbot, window, qwen, key):
    from attnviz.session.translate.quantities import ATTRIBUTION
    from tests.gui.test_quantities import ready

    tab = load(qtbot, window, str(qwen))
    translate(qtbot, window, SENTENCE)
    ready(qtbot, window, key)
    maps = tab.quantity.result.maps[ATTRIBUTION.key]  # [L, 1, T, S + T]: the whole prompt, then the prefix
    s, t = len(tab.document.src_tokens), len(tab.document.steps)
    assert maps.shape == (3, 1, t, s + t) and maps.min() >= 0
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-4)
    assert tab.attention.kind == ATTRIBUTION.key and "one sequence" in tab.attention.caption.text()


def test_the_analysis_tab_ranks_an_llms_translations_and_says_what_it_reads(qtbot, window, qwen, tmp_path):
    from attnviz.engine.attribution.suspect.components import SPAN_NOTE

    load(qtbot, window, str(qwen))
    tab = window.analysis_tab
    panel = tab.suspect
    tab.pages.setCurrentWidget(panel)
    src = tmp_path / "src.txt"
    src.write_text(f"{SENTENCE}\nDie Frau läuft schnell.\nEin Hund.\n", encoding="utf-8")
    tab.set_files(str(src), None)
    panel.compute()
    qtbot.waitUntil(lambda: not panel.is_running() and panel.ranking is not None, timeout=60000)
    assert panel.table.model().rowCount() == 3
    assert all(0 < r["alti_source_share"] < 1 and 0 <= r["attn_ign_src"] <= 1 for r in panel.model.records)
    assert "no cross-attention" in panel.summary.text() and SPAN_NOTE in panel.summary.toolTip()


def test_the_step_table_shows_an_llms_span_instruction_and_prefix_shares(qtbot, window, qwen):
    from PySide6.QtCore import Qt

    from attnviz.gui.translate.step_model import PARTS, SHARE

    tab = load(qtbot, window, str(qwen))
    translate(qtbot, window, SENTENCE)
    tab.go_to(0)
    from tests.gui.test_quantities import ready

    ready(qtbot, window, "gradient-x-input")
    parts = tab.quantity.result.parts
    t = len(tab.document.steps)
    assert parts.shape == (t, 3) and np.all(parts >= 0)
    np.testing.assert_allclose(parts.sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(tab.quantity.result.share, parts[:, 0])  # the bars show the span's share
    model = tab.step_model
    column = model.columns().index(SHARE)
    assert model.headerData(column, Qt.Orientation.Horizontal) == PARTS
    assert "the instruction and chat template" in model.headerData(column, Qt.Orientation.Horizontal,
                                                                   Qt.ItemDataRole.ToolTipRole)
    assert model.data(model.index(0, column)) == "·".join(f"{100 * v:.0f}" for v in parts[0])
    # readable in the narrow side column: the column takes what its figures need, at 1366x768 too
    from PySide6.QtWidgets import QHeaderView

    window.resize(1366, 768)
    qtbot.wait(50)
    table = tab.step_table
    assert table.horizontalHeader().sectionResizeMode(column) == QHeaderView.ResizeMode.ResizeToContents
    widest = max(table.fontMetrics().horizontalAdvance(model.data(model.index(r, column))) for r in range(t))
    assert table.columnWidth(column) >= widest


def test_a_models_own_length_limit_is_said_and_max_length_waits_for_attnvizs_decoding(qtbot, window, qwen):
    from attnviz.gui.translate.playback import MAX_LEN_TIP

    tab = load(qtbot, window, str(qwen))  # its generation_config.json: at most 12 new tokens
    spin = tab.playback.max_len_spin
    assert tab.sampling_row.uses_configured() and not spin.isEnabled() and "stops at 12 tokens" in spin.toolTip()
    statuses: list[str] = []
    window.statusBar().messageChanged.connect(statuses.append)
    translate(qtbot, window, SENTENCE)  # the random model never ends: cut at the model's 12
    assert len(tab.document.steps) == 12
    told = "raise Max length, after choosing Greedy or Beam search in Decoding: the model's own decoding stops at 12"
    assert any(told in s for s in statuses) and told in tab.message.text()
    last = tab.step_model.index(tab.step_model.rowCount() - 1, 1)
    assert told in tab.step_model.data(last, Qt.ItemDataRole.ToolTipRole)
    tab.sampling_combo.setCurrentIndex(0)  # attnviz's greedy: Max length applies, and is what the messages name
    assert spin.isEnabled() and spin.toolTip() == MAX_LEN_TIP
    spin.setValue(5)
    translate(qtbot, window, SENTENCE)
    assert len(tab.document.steps) == 5 and "(raise Max length to let it finish)" in tab.message.text()
    assert "Decoding" not in tab.message.text()


@pytest.mark.data
def test_the_analysis_tab_runs_on_an_llm_with_its_default_corpus(qtbot, window, qwen, data_dir, monkeypatch):
    """An LLM names no training corpus: the tab's default (the validation split) reads Multi30k's."""
    monkeypatch.setenv("ATTNVIZ_DATA", str(data_dir))
    load(qtbot, window, str(qwen))
    tab = window.analysis_tab
    assert tab.corpus_combo.currentData() == "val"
    tab.limit_spin.setValue(4)
    statuses: list[str] = []
    tab.status.connect(statuses.append)
    tab.run()
    qtbot.waitUntil(lambda: tab.run_button.isEnabled() and tab.stats is not None, timeout=120000)
    assert tab.stats is not None and not [s for s in statuses if "error" in s.lower() or "preset" in s]
