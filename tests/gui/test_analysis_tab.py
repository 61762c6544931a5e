"""The Analysis tab: a run over text files fills the table and the map, a head lists its sentences and opens one in
the Translate tab, gold alignments add an AER map, Cancel stops a run, and the current sentence shows every view."""

from __future__ import annotations

import pytest

from tests.gui.conftest import translate


@pytest.fixture()
def corpus(tmp_path):
    src, tgt, gold = tmp_path / "src.txt", tmp_path / "tgt.txt", tmp_path / "gold.txt"
    src.write_text("q1 q2 q3\nq4 q5\nq6 q7 q8 q9\nq10\n")
    tgt.write_text("w3 w2 w1\nw5 w4\nw9 w8 w7 w6\nw10\n")
    gold.write_text("0-2 1-1 2-0\n0-1 1-0\n0-3 1-2 2-1 3-0\n0-0\n")
    return str(src), str(tgt), str(gold)


def _run(qtbot, tab):
    tab.run()
    qtbot.waitUntil(lambda: not tab.is_running() and tab.stats is not None, timeout=30000)


def test_run_fills_table_map_and_opens_a_sentence(qtbot, loaded, corpus):
    window = loaded
    tab = window.analysis_tab
    assert window.tabs.tabText(window.tabs.indexOf(tab)) == "Analysis"  # reached with Ctrl+3
    tab.set_files(corpus[0], corpus[1])
    _run(qtbot, tab)
    assert tab.table_model.rowCount() == 3 * 2 * 4
    assert tab.head_map.data().matrix.shape == (2, 4)
    assert "positional" in tab.thresholds.text()
    tab.table.selectRow(0)
    assert tab.sentence_list.count() > 0
    sentence = tab.sentence_list.currentItem().data(256)  # Qt.UserRole
    with qtbot.waitSignal(tab.open_sentence):
        tab.open_button.click()
    assert window.tabs.currentWidget() is window.translate_tab
    assert window.translate_tab.source_edit.text() == sentence


def test_gold_alignments_add_an_aer_map(qtbot, loaded, corpus):
    tab = loaded.analysis_tab
    tab.set_files(corpus[0], corpus[1])
    tab.gold.set_path(corpus[2])
    _run(qtbot, tab)
    qtbot.waitUntil(lambda: tab.alignment is not None, timeout=30000)
    assert tab.stat_combo.currentData() == "aer"
    assert tab.head_map.data().matrix.shape == (2, 4)
    assert 0.0 <= tab.alignment.aer_average <= 1.0


def test_a_published_set_reads_as_the_command_line_reads_it(qtbot, loaded, tmp_path):
    """A '|||' file listing the target first, 1-based gold links with ipj: the tab's AER map is the engine's."""
    import numpy as np

    from attnviz.engine.analysis.alignment import align_steps
    from attnviz.engine.analysis.goldset import read_set

    pairs, gold = tmp_path / "set.txt", tmp_path / "set.gold"
    pairs.write_text("w3 w2 w1 ||| q1 q2 q3 \nw5 w4 ||| q4 q5 \n")
    gold.write_text("1-3 2p2 3-1 \n2-1 1p2 \n")  # target word first, from 1
    tab = loaded.analysis_tab
    tab.set_files(str(pairs), None, "pairs")
    assert tab.corpus_choice() == ("pairs", str(pairs), None)
    tab.gold.set_path(str(gold))
    tab.gold.numbering.setCurrentIndex(tab.gold.numbering.findData(True))
    tab.gold.reverse.setChecked(True)
    assert tab.gold.options() == (str(gold), True, True)
    _run(qtbot, tab)
    qtbot.waitUntil(lambda: tab.alignment is not None, timeout=30000)
    found = read_set(str(pairs), gold=str(gold), one_based=True, reverse=True)
    assert found.sources[0] == ("q1", "q2", "q3")
    expected = list(align_steps(loaded.translator, found.sources, found.targets, found.gold()))[-1]
    assert np.allclose(tab.alignment.aer_heads, expected.aer_heads)
    assert tab.stat_combo.currentData() == "aer"
    tab.gold.reverse.setChecked(False)
    gold.write_text("1-3 2p2 3-1\n1-3 1p2\n")  # source first now: target word 3 of 2
    tab.run()
    qtbot.waitUntil(lambda: not tab.is_running() and tab.failed, timeout=30000)
    assert "set.gold, line 2: link 1-3 names target word 3, but the target side has 2 words" in tab.head_title.text()


def test_cancel_stops_the_run(qtbot, loaded, corpus):
    tab = loaded.analysis_tab
    tab.set_files(corpus[0], None)
    tab.run()
    tab.cancel()
    assert tab.run_button.isEnabled() and not tab.cancel_button.isEnabled()


def test_current_sentence_views(qtbot, loaded):
    window = loaded
    translate(qtbot, window, "q1 q2 q3")
    window.tabs.setCurrentWidget(window.analysis_tab)
    views = window.analysis_tab.sentence_views
    qtbot.waitUntil(lambda: bool(views.views), timeout=20000)
    assert set(views.views) == {"raw", "norm", "rollout", "rollout-residual"}
    views.view_combo.setCurrentIndex(views.view_combo.findData("norm"))
    assert "norm-weighted" in views.quantity.text() and "sums to 1" in views.quantity.text()
    views.view_combo.setCurrentIndex(views.view_combo.findData("rollout-residual"))
    assert not views.head_spin.isEnabled()


def test_compare_with_a_second_checkpoint(qtbot, loaded, corpus, tmp_path):
    from tests.helpers import make_toy_lm, make_toy_translator

    tab = loaded.analysis_tab
    other = tmp_path / "other.safetensors"
    make_toy_translator(seed=3).save(other, name="other")
    tab.set_files(corpus[0], corpus[1])
    tab.set_compare(str(other))
    _run(qtbot, tab)
    qtbot.waitUntil(lambda: tab.stats_b is not None, timeout=30000)
    assert tab.diff_check.isChecked() and "minus" in tab.head_map.data().title
    tab.diff_check.setChecked(False)
    assert "minus" not in tab.head_map.data().title
    foreign = tmp_path / "lm.safetensors"
    make_toy_lm().save(foreign, name="lm")
    tab.set_compare(str(foreign))
    with qtbot.waitSignal(tab.worker.failed, timeout=30000) as blocker:
        tab.run()
    failure = blocker.args[0]
    assert "vocabularies" in failure.text and failure.expected


def test_current_sentence_against_a_second_checkpoint(qtbot, loaded, tmp_path):
    from tests.helpers import make_toy_translator

    window = loaded
    other = tmp_path / "other.safetensors"
    make_toy_translator(seed=3).save(other, name="other")
    window.analysis_tab.set_compare(str(other))
    translate(qtbot, window, "q1 q2")
    window.tabs.setCurrentWidget(window.analysis_tab)
    views = window.analysis_tab.sentence_views
    qtbot.waitUntil(lambda: "difference" in views.views, timeout=20000)
    views.view_combo.setCurrentIndex(views.view_combo.findData("difference"))
    assert views.heatmap.data().per_map and "minus" in views.quantity.text()
    raw, compared = views.views["raw"]["cross"], views.views["compare"]["cross"]
    assert abs(views.views["difference"]["cross"] - (compared - raw)).max() < 1e-6
    assert views.side_heatmap.isHidden()
    views.view_combo.setCurrentIndex(views.view_combo.findData("side-by-side"))  # A beside B
    views.kind_combo.setCurrentIndex(views.kind_combo.findData("cross"))
    assert not views.side_heatmap.isHidden() and "beside" in views.quantity.text()
    layer, head = views.layer_spin.value() - 1, views.head_spin.value() - 1
    assert abs(views.heatmap.data().matrix - raw[layer, head]).max() == 0
    assert abs(views.side_heatmap.data().matrix - compared[layer, head]).max() == 0
    assert "compared checkpoint" in views.side_heatmap.data().title


def test_compare_dialog_starts_at_the_other_file_of_the_run(tmp_path):
    from attnviz.gui.analysis.tab import run_partner

    best, last = tmp_path / "run.safetensors", tmp_path / "run.last.safetensors"
    assert run_partner(str(best)) == str(tmp_path)  # no partner yet: the folder
    best.write_bytes(b"")
    last.write_bytes(b"")
    assert run_partner(str(best)) == str(last)
    assert run_partner(str(last)) == str(best)
    assert run_partner(str(tmp_path / "run.epoch3.safetensors")) == str(best)
    assert run_partner(None) == ""


def test_compare_with_another_architecture_is_refused_before_any_work(qtbot, loaded, corpus, tmp_path):
    """The LSTM beside the transformer: one clear line, no "done", no B - A and no stale statistics."""
    from tests.helpers import make_toy_translator

    tab = loaded.analysis_tab
    messages: list[str] = []
    tab.status.connect(messages.append)
    lstm = tmp_path / "lstm.safetensors"
    make_toy_translator(seed=3, kind="rnn-attention", heads=1).save(lstm, name="lstm")
    tab.set_files(corpus[0], corpus[1])
    tab.set_compare(str(lstm))
    with qtbot.waitSignal(tab.worker.failed, timeout=30000) as blocker:
        tab.run()
    qtbot.waitUntil(lambda: not tab.is_running(), timeout=30000)
    failure = blocker.args[0]
    assert failure.expected and failure.text.startswith("lstm.safetensors cannot be compared with the loaded model")
    assert "shares no kind of the same layers x heads" in failure.text and "\n" not in failure.text
    assert tab.stats is None and tab.stats_b is None  # refused before the loaded model's statistics were run
    assert not tab.diff_check.isEnabled() and not tab.diff_check.isChecked()
    assert messages[-1] == failure.text and not any(m.startswith("Analysis done") for m in messages)
    assert "The analysis failed" in tab.head_title.text()


def test_b_minus_a_never_shows_a_values_for_a_kind_b_lacks(qtbot, loaded, corpus, tmp_path):
    """A checkpoint with other encoder layers compares on decoder and cross; its encoder map under Show B - A is
    empty with a reason, not the loaded model's own figures."""
    from tests.helpers import make_toy_translator

    tab = loaded.analysis_tab
    deeper = tmp_path / "deeper.safetensors"
    make_toy_translator(seed=3, enc_layers=3).save(deeper, name="deeper")
    tab.set_files(corpus[0], corpus[1])
    tab.set_compare(str(deeper))
    _run(qtbot, tab)
    qtbot.waitUntil(lambda: tab.stats_b is not None and not tab.is_running(), timeout=30000)
    tab.kind_combo.setCurrentIndex(tab.kind_combo.findData("cross"))
    assert "minus" in tab.head_map.data().title
    tab.kind_combo.setCurrentIndex(tab.kind_combo.findData("encoder"))
    assert tab.head_map.data() is None and "no encoder attention of the same layers" in tab.head_map.placeholder
