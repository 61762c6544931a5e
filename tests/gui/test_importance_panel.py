"""The Analysis tab's head-importance page: Compute fills a layer x head map per kind with the engine's figures
(hover tells them exactly), Cancel stops between heads, and a saved file opens into the same map."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz.engine.analysis.importance import compute_importance


@pytest.fixture()
def corpus(tmp_path):
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("q1 q2 q3\nq4 q5\nq6 q7 q8 q9\nq10\n")
    tgt.write_text("w3 w2 w1\nw5 w4\nw9 w8 w7 w6\nw10\n")
    return str(src), str(tgt)


def test_compute_shows_every_kinds_bleu_lost(qtbot, loaded, corpus, trained_translator):
    tab = loaded.analysis_tab
    panel = tab.importance
    tab.pages.setCurrentWidget(panel)
    tab.set_files(*corpus)
    panel.compute()
    assert panel.cancel_button.isEnabled() and not panel.compute_button.isEnabled()
    qtbot.waitUntil(lambda: not panel.is_running() and panel.result is not None, timeout=60000)
    expected = compute_importance(trained_translator, list(zip(*[open(f).read().split("\n")[:4] for f in corpus])))
    assert panel.result.baseline == pytest.approx(expected.baseline)
    assert [panel.kind_combo.itemData(i) for i in range(panel.kind_combo.count())] == ["encoder", "decoder", "cross"]
    for i, kind in enumerate(("encoder", "decoder", "cross")):
        panel.kind_combo.setCurrentIndex(i)
        shown = panel.map.data().matrix
        assert shown.shape == (2, 4)
        np.testing.assert_allclose(shown, expected.matrix(kind))
        assert "BLEU lost" in panel.map.data().title
    top = panel.result.heads[0]
    panel.kind_combo.setCurrentIndex(panel.kind_combo.findData(top.kind))
    hover = panel.map.describe_cell(top.layer, top.head)
    low, high = top.interval
    assert hover.startswith(f"layer {top.layer + 1}, head {top.head + 1}: BLEU lost {top.delta:+.2f} BLEU (95% "
                            f"interval {low:+.2f} to {high:+.2f}")
    assert f"BLEU {top.bleu:.2f} with it off" in hover
    clear = sum(h.clear() for h in panel.result.heads)
    assert f"{clear} of 24 heads' losses are clear of noise" in panel.summary.text()
    assert f"{panel.result.baseline:.2f}" in panel.summary.text() and panel.save_button.isEnabled()
    # a diverging scale centred on zero: a head that helps and one that hurts differ in hue, not only in shade
    assert panel.map.data().signed
    lo, hi = panel.map.colour_range()
    assert lo == -hi and hi == pytest.approx(max(abs(h.delta) for h in panel.result.heads if h.kind == top.kind)
                                             or 1.0)


def test_the_signed_scale_is_blue_below_white_at_and_red_above_zero():
    from attnviz.gui.attention.colormap import to_image

    image = to_image(np.array([[-2.0, 0.0, 2.0, np.nan]]), signed=True)
    blue, white, red, unmeasured = (image.pixelColor(c, 0) for c in range(4))
    assert blue.blue() > 150 > blue.red() and red.red() > 150 > red.blue()
    assert min(white.red(), white.green(), white.blue()) > 240 and unmeasured == white
    plain = to_image(np.array([[0.0, 1.0]]))  # weights keep viridis: dark purple to yellow
    assert plain.pixelColor(0, 0).blue() > plain.pixelColor(0, 0).green() and plain.pixelColor(1, 0).red() > 200


def test_cancel_stops_and_references_are_required(qtbot, loaded, corpus):
    tab = loaded.analysis_tab
    panel = tab.importance
    tab.set_files(corpus[0], None)
    with qtbot.waitSignal(panel.status) as blocker:
        panel.compute()
    assert "references" in blocker.args[0] and not panel.is_running()
    tab.set_files(*corpus)
    panel.compute()
    panel.cancel()
    assert panel.compute_button.isEnabled() and not panel.cancel_button.isEnabled() and panel.result is None


def test_a_saved_file_opens_into_the_map(qtbot, loaded, tmp_path, trained_translator, capsys):
    from attnviz.cli.main import main

    model = tmp_path / "toy.safetensors"
    trained_translator.save(model, name="toy")
    (tmp_path / "s.txt").write_text("q1 q2 q3\nq4 q5\n")
    (tmp_path / "r.txt").write_text("w3 w2 w1\nw5 w4\n")
    out = tmp_path / "imp.json"
    assert main(["head-importance", "-m", str(model), "--src", str(tmp_path / "s.txt"), "--ref",
                 str(tmp_path / "r.txt"), "--kinds", "cross", "--out", str(out)]) == 0
    panel = loaded.analysis_tab.importance
    panel.open_file(str(out))
    data = json.loads(out.read_text())
    assert panel.kind_combo.count() == 1 and panel.kind_combo.currentData() == "cross"
    for h in data["heads"]:
        assert panel.map.data().matrix[h["layer"] - 1, h["head"] - 1] == pytest.approx(h["delta"])
    panel.save_file(str(tmp_path / "again.json"))
    assert json.loads((tmp_path / "again.json").read_text())["heads"] == data["heads"]
    (tmp_path / "bad.json").write_text("{\"format\": 3}")
    panel.open_file(str(tmp_path / "bad.json"))
    assert "Cannot open bad.json" in panel.summary.text() and panel.result is not None  # the last result stays


def test_the_map_fills_in_while_it_runs_with_an_eta_and_cancel_clears_the_old_map(qtbot, loaded, corpus):
    from PySide6.QtCore import QObject, Slot

    from attnviz.engine.analysis.names import IMPORTANCE_SPLIT

    tab = loaded.analysis_tab
    panel = tab.importance
    assert tab.corpus_combo.currentData() == IMPORTANCE_SPLIT == "val"  # the CLI's default too
    tab.set_files(*corpus)
    seen: list[tuple[int, str, bool]] = []

    class Recorder(QObject):  # connected after the panel's own slot: sees the panel as each event left it
        @Slot(object)
        def record(self, event) -> None:
            partial = panel.partial
            seen.append((len(partial.heads) if partial else -1, panel.progress.format(), panel.map.data() is not None))

    recorder = Recorder()
    panel.worker.produced.connect(recorder.record)
    panel.compute()
    qtbot.waitUntil(lambda: not panel.is_running() and panel.result is not None, timeout=60000)
    partial = [entry for entry in seen if 0 < entry[0] < 24]
    assert partial and all(shown and " left" in text for _, text, shown in partial)  # a partial map and the time left
    assert [n for n, _, _ in seen if n >= 0] == list(range(0, 25))  # the baseline, then one head more each time
    old = panel.map.data().matrix.copy()  # the finished map shows the result (all zeros where no head matters)
    np.testing.assert_allclose(old, panel.result.matrix(panel.kind_combo.currentData()))
    panel.limit_spin.setValue(2)  # new settings, then Cancel: the old map does not stay beside them
    panel.compute()
    assert panel.map.data() is None and panel.result is None
    panel.cancel()
    assert panel.map.data() is None and panel.result is None and not panel.save_button.isEnabled()
    assert panel.summary.text().startswith("Cancelled after")


def test_a_sample_of_heads_is_measured_and_said(qtbot, loaded, corpus):
    tab = loaded.analysis_tab
    panel = tab.importance
    tab.pages.setCurrentWidget(panel)
    tab.set_files(*corpus)
    panel.sample_spin.setValue(3)
    panel.compute()
    assert not panel.sample_spin.isEnabled()
    qtbot.waitUntil(lambda: not panel.is_running() and panel.result is not None, timeout=60000)
    assert len(panel.result.heads) == 3 and panel.progress.maximum() == 4  # the baseline and 3 heads
    assert "Measured 3 of 24 heads, drawn at random (seed 0); the blank tiles were not switched off." \
        in panel.summary.text()
    assert sum(int((~np.isnan(panel.result.matrix(k))).sum()) for k in panel.result.layout) == 3
