"""The Translate tab's Quantity choice (issue 27): choosing a quantity puts the engine's numbers for the step in the
map (norm-weighted attention, rollout, a registered attribution method); a slow method runs in the worker and
Cancel stops it, leaving the map on attention; the sinks toggle hides the sink columns and renormalises the rows;
methods the model's kind cannot give are greyed with the reason; the source share shows under each output token and
in the step table; "Why this and not ...?" asks the method for a contrast with that foil."""

import json
import threading

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItemModel

from attnviz.engine.analysis.contributions import sentence_views
from attnviz.engine.analysis.sinks import is_sink
from attnviz.engine.attribution.base import Attribution, AttributionMethod, AttributionProgress, registered
from attnviz.gui.shortcuts import mnemonic_owners
from attnviz.session.translate.quantities import ATTRIBUTION
from tests.gui.conftest import load_toy_lm, translate

SENTENCE = "q1 q2 q3 q1"


def _ramp(translator, src, out, settings, stop):
    """Deterministic values that tell every cell apart: source s + 10 t + 100 l, prefix -(that); the foil's length
    added, so a contrast gives other numbers."""
    yield AttributionProgress(0, len(out), "ramp")
    layers, t, s = 2, len(out), len(src)
    shift = len(settings.foil or "")
    grid = np.arange(layers)[:, None, None] * 100 + np.arange(t)[None, :, None] * 10
    source = (grid + np.arange(s)[None, None, :] + shift).astype(np.float64)
    prefix = -(grid + np.arange(t)[None, None, :]).astype(np.float64) * np.tril(np.ones((t, t)))
    yield Attribution("ramp", {"aggregate": "sum", "foil": settings.foil}, src, out, source, prefix, layered=True,
                      notes=("a ramp for tests",))


def _wait_for_stop(translator, src, out, settings, stop):
    yield AttributionProgress(0, len(out), "waiting")
    while not stop.is_set():  # a slow method: it ends only when asked to stop
        stop.wait(0.05)
    STOPPED.set()


STOPPED = threading.Event()
RAMP = AttributionMethod("ramp", "Ramp", "a test method", True, _ramp, settings=("foil",))
SLOW = AttributionMethod("slow", "Slow", "never ends by itself", False, _wait_for_stop)
SOURCE_ONLY = AttributionMethod("needs-lm", "LM only", "defined for language models only", False, _ramp,
                                not_defined=lambda kind: "it reads no source" if kind.has_source else None)


@pytest.fixture()
def methods():
    with registered(RAMP), registered(SLOW), registered(SOURCE_ONLY):
        yield


def ready(qtbot, window, key: str):
    tab = window.translate_tab
    tab.quantity.choose(key)
    qtbot.waitUntil(lambda: tab.quantity.result is not None and tab.quantity.result.quantity.key == key,
                    timeout=20000)
    tab.attention.heatmap.repaint()
    return tab


def test_norm_weighted_and_rollout_show_the_engines_numbers_for_the_step(qtbot, loaded):
    tab = translate(qtbot, loaded, SENTENCE)
    tab.go_to(2)
    t = tab.document.translation(-1)
    views = sentence_views(loaded.translator, t.src_tokens, t.decoder_inputs)
    attention = tab.attention.heatmap.data().matrix.copy()
    ready(qtbot, loaded, "norm")
    panel = tab.attention
    panel.select(kind="cross", layer=0, head=None)
    shown = panel.heatmap.data()
    expected = views["norm"]["cross"][0].mean(0)[:3]  # steps 1..3 as of step 3
    np.testing.assert_allclose(shown.matrix, expected, rtol=1e-5)
    assert shown.title.startswith("Norm-weighted · Cross-attention") and not np.allclose(shown.matrix, attention)
    ready(qtbot, loaded, "rollout-residual")
    assert panel.head_combo.count() == 2  # one map per layer: no heads to choose
    np.testing.assert_allclose(panel.heatmap.data().matrix, views["rollout-residual"]["cross"][0, 0][:3], rtol=1e-5)
    np.testing.assert_allclose(panel.heatmap.data().matrix.sum(1), 1, rtol=1e-5)


def test_an_attribution_method_fills_the_map_grid_bars_and_step_table(qtbot, loaded, methods):
    loaded.translate_tab.quantity.set_translator(loaded.translator)  # the registry is read when a model is set
    tab = translate(qtbot, loaded, SENTENCE)
    n, s = len(tab.document.steps), len(tab.document.src_tokens)
    tab.go_to(1)
    ready(qtbot, loaded, "ramp")
    panel = tab.attention
    assert panel.kind == ATTRIBUTION.key and panel.layer_combo.count() == 2 and panel.grid.shape() == (2, 1)
    data = panel.heatmap.data()
    assert data.matrix.shape == (2, s + 2) and data.highlight_row == 1  # two steps; source then prefix columns
    assert data.cols == tuple(tab.document.src_tokens) + ("\u2192<sos>", "\u2192" + tab.document.steps[0].token)
    assert data.masked[0].tolist() == [False] * (s + 1) + [True]  # step 1 cannot see the input after it
    assert data.matrix[1, 3] == 100 + 10 + 3 and data.matrix[1, s + 1] == -(100 + 10 + 1)  # layer 2, step 2
    assert data.per_map and data.signed
    assert not panel.scale_combo.isEnabled() and "own colour scale" in panel.scale_combo.toolTip()  # not "0..1"
    assert "output token 2" in panel.caption.text() and "a ramp for tests" in panel.caption.text()
    source = np.abs(np.arange(s) + 110).sum()
    share = source / (source + np.abs(-(110 + np.arange(n)) * (np.arange(n) <= 1)).sum())
    model = tab.step_model
    assert model.columnCount() == 6 and model.headerData(5, Qt.Orientation.Horizontal) == "Source share"
    assert model.data(model.index(1, 5)) == f"{share:.0%}"
    assert "Source share (Ramp)" in tab.output_view.accessible_value()
    tab.quantity.choose("attention")
    assert model.columnCount() == 5 and "Source share" not in tab.output_view.accessible_value()
    assert panel.scale_combo.isEnabled()


def test_why_this_and_not_a_foil_asks_a_contrast(qtbot, loaded, methods):
    loaded.translate_tab.quantity.set_translator(loaded.translator)
    tab = translate(qtbot, loaded, SENTENCE)
    tab.go_to(0)
    tab.topk_view.foil.emit("w7")  # from attention: the first method that takes a foil
    qtbot.waitUntil(lambda: tab.quantity.result is not None, timeout=20000)
    assert "foil" in tab.quantity.wanted.reads and tab.quantity.result.settings["foil"] == "w7"
    ready(qtbot, loaded, "ramp")
    assert tab.quantity.result.settings["foil"] is None  # picked in the selector: the method as such
    tab.topk_view.foil.emit("w7")  # the method shown takes a foil: that one
    qtbot.waitUntil(lambda: tab.quantity.result is not None and tab.quantity.result.settings["foil"] == "w7",
                    timeout=20000)
    result = tab.quantity.result
    assert result.quantity.key == "ramp" and result.settings["foil"] == "w7"
    assert tab.attention.heatmap.data().matrix[0, 0] == 100 + len("w7")  # the last layer, step 1, source 1


def test_cancel_stops_a_slow_method_and_leaves_the_map_on_attention(qtbot, loaded, methods):
    loaded.translate_tab.quantity.set_translator(loaded.translator)
    tab = translate(qtbot, loaded, SENTENCE)
    attention = tab.attention.heatmap.data().matrix.copy()
    STOPPED.clear()
    tab.quantity.choose("slow")
    bar = tab.quantity.bar
    qtbot.waitUntil(lambda: bar.progress_label.text() == "Slow: waiting", timeout=20000)
    assert bar.busy.isVisibleTo(tab) and bar.cancel_action.isEnabled()
    np.testing.assert_array_equal(tab.attention.heatmap.data().matrix, attention)  # attention while computing
    bar.cancel_action.trigger()
    assert STOPPED.wait(10)  # the job saw the stop and ended
    assert bar.key == "attention" and not bar.busy.isVisibleTo(tab) and tab.quantity.result is None
    np.testing.assert_array_equal(tab.attention.heatmap.data().matrix, attention)
    assert tab.attention.kind in ("encoder", "decoder", "cross")


def test_a_method_the_kind_cannot_give_is_greyed_with_the_reason(qtbot, loaded, methods):
    loaded.translate_tab.quantity.set_translator(loaded.translator)
    bar = loaded.translate_tab.quantity.bar
    index = bar.combo.findData("needs-lm")
    model = bar.combo.model()
    assert isinstance(model, QStandardItemModel) and not model.item(index).isEnabled()
    assert "Not available for this model: it reads no source." in bar.combo.itemData(index, 3)  # ToolTipRole
    assert bar.combo.itemData(bar.combo.findData("ramp"), 3).startswith("a test method")


def test_dropping_sinks_hides_their_columns_and_renormalises_rows(qtbot, loaded):
    tab = translate(qtbot, loaded, SENTENCE)
    panel = tab.attention
    panel.select(kind="cross", layer=0, head=0)  # one head: each head's rows are renormalised, then averaged
    before = panel.heatmap.data()
    assert any(is_sink(c) for c in before.cols)
    tab.quantity.bar.sinks_check.setChecked(True)
    after = panel.heatmap.data()
    kept = [i for i, c in enumerate(before.cols) if not is_sink(c)]
    assert after.cols == tuple(before.cols[i] for i in kept)
    np.testing.assert_allclose(after.matrix.sum(1), 1, rtol=1e-5)
    expected = before.matrix[:, kept] / before.matrix[:, kept].sum(1, keepdims=True)
    np.testing.assert_allclose(after.matrix, expected, rtol=1e-5)
    assert "Sink columns" in panel.caption.text()
    panel.select(head=None)
    np.testing.assert_allclose(panel.heatmap.data().matrix.sum(1), 1, rtol=1e-5)
    assert tab.quantity.source().maps("cross", tab.document.current).shape[-1] == len(kept)  # the grid too


def test_the_quantity_controls_have_letters_of_their_own(qtbot, loaded):
    owners = mnemonic_owners(loaded)
    for letter, name in (("q", "quantityCombo"), ("z", "sinksCheck"), ("j", "besideCheck")):
        assert len(owners[letter]) == 1 and name in owners[letter][0] or letter == "q" and \
            "Quantity" in owners[letter][0], (letter, owners[letter])


def test_exports_carry_the_method_and_its_settings(qtbot, loaded, methods, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    loaded.translate_tab.quantity.set_translator(loaded.translator)
    tab = translate(qtbot, loaded, SENTENCE)
    tab.go_to(1)
    ready(qtbot, loaded, "ramp")
    tab.topk_view.foil.emit("w7")
    qtbot.waitUntil(lambda: tab.quantity.result is not None and tab.quantity.result.settings["foil"] == "w7",
                    timeout=20000)
    asked = []

    def dialog(parent, caption, start, filters):
        asked.append(start)
        return str(tmp_path / start), ""

    monkeypatch.setattr(QFileDialog, "getSaveFileName", dialog)
    drawn = []
    monkeypatch.setattr("attnviz.plots.heatmap.draw_heatmap", lambda fig, *a: drawn.append(a))
    loaded.export_view("svg")
    loaded.export_attention()
    assert asked[0] == "ramp-L2-step2.svg" and (tmp_path / asked[0]).exists()
    signed, value, title = drawn[0][-2], drawn[0][-1], drawn[0][5]  # the signed map as the app shows it, not 0..1
    assert signed and value == "Ramp" and "signed colour scale centred on 0" in title
    figure = json.loads((tmp_path / "ramp-L2-step2.svg.json").read_text())
    assert figure["quantity"]["method"] == "ramp" and figure["quantity"]["settings"] == {"aggregate": "sum",
                                                                                         "foil": "w7"}
    assert "Contrastive ramp vs 'w7' (foil)" in figure["title"] and "step 2/" in figure["title"]  # what and vs what
    archive = tmp_path / asked[1]
    sidecar = json.loads(archive.with_suffix(".json").read_text())
    assert sidecar["quantity"]["settings"]["foil"] == "w7" and sidecar["quantity"]["notes"] == ["a ramp for tests"]
    with np.load(archive) as arrays:
        n, s = len(tab.document.steps), len(tab.document.src_tokens)
        assert arrays["ramp_attribution"].shape == (2, 1, n, s + n) and arrays["cross"].ndim == 4
        assert arrays["ramp_attribution"][1, 0, 1, 3] == 100 + 10 + 3 + len("w7")
        assert list(arrays["ramp_columns"][:s]) == list(tab.document.src_tokens)


def test_the_logit_lens_page_shows_each_layers_prediction_for_the_step(qtbot, loaded):
    from attnviz.engine.attribution.logit_lens import logit_lens_steps

    tab = translate(qtbot, loaded, SENTENCE)
    lens_page = tab.quantity.lens
    assert lens_page.lens is None and not lens_page.worker.is_running()  # a hidden page computes nothing
    tab.search.side.setCurrentIndex(tab.search.side.count() - 1)
    qtbot.waitUntil(lambda: lens_page.lens is not None, timeout=20000)
    t = tab.document.translation(-1)
    lens = list(logit_lens_steps(loaded.translator, t.src_tokens, t.tokens, top_k=3))[-1]
    tab.go_to(1)
    table = lens_page.table
    assert table.rowCount() == lens.layers
    for layer in range(lens.layers):
        assert table.item(layer, 1).text() == f"{lens.chosen_prob[layer, 1]:.3f}"
        assert table.item(layer, 2).text() == str(int(lens.chosen_rank[layer, 1]))
    assert lens_page.caption.text().startswith(f"Step 2, {t.tokens[1]!r}: ")
    assert tab.search.side.tabText(tab.search.side.count() - 1) == "Logit lens"


def test_a_methods_settings_menu_recomputes_it_with_the_value_chosen(qtbot, loaded):
    tab = translate(qtbot, loaded, SENTENCE)
    ready(qtbot, loaded, "integrated-gradients")
    assert tab.quantity.result.settings["steps"] == 32
    bar = tab.quantity.bar
    assert bar.settings_button.isEnabled()
    menus = {m.title(): m for m in (a.menu() for a in bar.settings_menu.actions()) if m is not None}
    assert set(menus) == {"Contrast with (foil)", "Aggregation over the embedding", "Attributed quantity",
                          "Integration steps", "Baseline"}
    steps = {a.text(): a for a in menus["Integration steps"].actions()}
    assert steps["32"].isChecked() and not steps["16"].isChecked()
    steps["16"].trigger()
    qtbot.waitUntil(lambda: tab.quantity.result is not None and tab.quantity.result.settings["steps"] == 16,
                    timeout=20000)
    assert "steps 16" in tab.attention.caption.text()
    ready(qtbot, loaded, "alti-plus")
    assert not bar.settings_button.isEnabled()  # ALTI+ has no settings


def test_a_language_model_attributes_to_its_earlier_outputs_only(qtbot, window, tmp_path):
    load_toy_lm(qtbot, window, tmp_path, steps=20)
    tab = translate(qtbot, window, "ab")
    assert next(q for q in tab.quantity.quantities if q.key == "rollout-residual").why_not  # no encoder
    ready(qtbot, window, "gradient-x-input")
    n = len(tab.document.steps)
    data = tab.attention.heatmap.data()
    assert tab.attention.kind_combo.currentText() == "Earlier outputs" and data.matrix.shape == (n, n)
    assert tab.step_model.columnCount() == 5  # no source, no source share


def test_a_figures_sidecar_does_not_overwrite_an_archives_of_the_same_name(tmp_path):
    """Exporting the view as x.png and the attention as x.npz used to write both sidecars to x.json (QA walk)."""
    from attnviz.gui.export_files import write_sidecar

    (tmp_path / "x.json").write_text('{"archive": true}')
    written = write_sidecar(tmp_path / "x.png", {"quantity": {"method": "ramp"}})
    assert written == tmp_path / "x.png.json"
    assert json.loads(written.read_text()) == {"quantity": {"method": "ramp"}}
    assert json.loads((tmp_path / "x.json").read_text()) == {"archive": True}
