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


def test_the_aer_map_draws_the_best_head_and_the_diagonal_baseline(qtbot, loaded, tmp_path):
    """A NAACL 2003 gold file read in the tab: the map frames the best head, hatches the heads worse than the
    diagonal baseline, marks the diagonal on the colour bar, and the note under it says so and how the file was
    read."""
    import numpy as np

    from attnviz.engine.analysis.goldset import read_set
    from attnviz.engine.analysis.scoring import score_links
    from attnviz.engine.analysis.symmetrise import diagonal

    src, tgt, gold = tmp_path / "s.txt", tmp_path / "t.txt", tmp_path / "g.wa"
    src.write_text("q1 q2 q3\nq4 q5\n")
    tgt.write_text("w3 w2 w1\nw5 w4\n")
    gold.write_text("2 2 1 S\n1 1 3\n1 2 2 P 0.7\n1 3 1\n1 0 1\n")
    tab = loaded.analysis_tab
    tab.set_files(str(src), str(tgt))
    tab.gold.set_path(str(gold))
    _run(qtbot, tab)
    qtbot.waitUntil(lambda: tab.alignment is not None, timeout=30000)
    result, marks = tab.alignment, tab.head_map.marks
    layer, head, value = result.best_head()
    assert marks is not None and marks.best == (layer, head, value)
    found = read_set(src=str(src), tgt=str(tgt), gold=str(gold))
    expected = score_links([diagonal(3, 3), diagonal(2, 2)], [set(s) for s in found.sure],
                           [set(p) for p in found.possible]).aer
    assert marks.diagonal == pytest.approx(expected, abs=1e-4)
    worse = int((result.aer_heads > marks.diagonal).sum())
    note = tab.head_map.note.text()
    assert not tab.head_map.note.isHidden()
    assert note.startswith(f"Framed: the best single head, layer {layer + 1} head {head + 1} (AER {value:.3f}). "
                           f"Diagonal baseline: AER {marks.diagonal:.3f}, the black line on the colour bar; hatched: "
                           f"the {worse} of {result.aer_heads.size} heads that align worse than it. Gold: NAACL 2003")
    assert "1 links to NULL (position 0) ignored" in note
    image = tab.head_map.grab().toImage()
    cells = tab.head_map.map_rect()
    cell_w, cell_h = cells.width() / result.aer_heads.shape[1], cells.height() / result.aer_heads.shape[0]
    x, y = int(cells.left() + head * cell_w + cell_w / 2), int(cells.top() + layer * cell_h + 1)
    assert image.pixelColor(x, y).lightness() < 40  # the black frame around the best head, white inside it
    assert image.pixelColor(x, y + 3).lightness() > 200
    assert np.isfinite(result.aer_heads).all()
    tab.stat_combo.setCurrentIndex(0)  # another statistic: no marks, no note
    assert tab.head_map.marks is None and tab.head_map.note.isHidden()
