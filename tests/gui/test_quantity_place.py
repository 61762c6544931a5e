"""One place for every quantity (issue 40): every per-sentence quantity (attention, the contribution views the
Analysis tab's sentence view shows, the logit lens, every attribution method) is a choice of the Translate tab's
Quantity selector; a contrast's foil is one state, chosen in the selector's settings menu or from the top-k chart's
menu, each showing the other's choice; and the map's title names the quantity with its foil and settings."""

import numpy as np

from attnviz.engine.analysis.names import SIDE_BY_SIDE, SIGNED_VIEWS
from attnviz.engine.attribution.base import all_methods
from attnviz.engine.attribution.logit_lens import logit_lens_steps
from attnviz.session.translate.quantities import Quantity, quantity_title, setting_choices, value_text
from tests.gui.conftest import translate
from tests.gui.test_quantities import SENTENCE, ready


def settings_menu(bar) -> dict:
    """The Quantity bar's settings menu: submenu title -> {action text: action}."""
    menus = [a.menu() for a in bar.settings_menu.actions() if a.menu() is not None]
    return {m.title(): {a.text(): a for a in m.actions()} for m in menus}


def why_action(tab, token: str):
    menu = tab.topk_view.candidate_menu(token)
    return next(a for a in menu.actions() if a.text().startswith("Why this and not"))


def test_every_per_sentence_quantity_is_a_choice_of_the_selector(qtbot, loaded):
    from attnviz.engine.analysis.names import VIEWS

    tab = translate(qtbot, loaded, SENTENCE)
    keys = [tab.quantity.bar.combo.itemData(i) for i in range(tab.quantity.bar.combo.count())]
    sentence_views = set(VIEWS) - {"raw", "compare", *SIDE_BY_SIDE, *SIGNED_VIEWS, "side-by-side"}
    assert sentence_views == {"norm", "rollout", "rollout-residual"}  # what the Analysis tab's sentence view adds
    assert sentence_views | {"attention", "logit-lens"} | {m.name for m in all_methods()} <= set(keys)
    assert len(keys) == len(set(keys))


def test_the_logit_lens_shows_in_the_map_with_each_layers_probability(qtbot, loaded):
    tab = translate(qtbot, loaded, SENTENCE)
    tab.go_to(2)
    ready(qtbot, loaded, "logit-lens")
    t = tab.document.translation(-1)
    lens = list(logit_lens_steps(loaded.translator, t.src_tokens, t.tokens))[-1]
    data = tab.attention.heatmap.data()
    assert data.matrix.shape == (3, lens.layers)  # the steps so far, a column per decoder layer
    np.testing.assert_allclose(data.matrix, lens.chosen_prob.T[:3], rtol=1e-5, atol=1e-6)
    assert data.cols == tuple(f"L{n + 1}" for n in range(lens.layers))
    assert data.title.startswith("Logit lens \u00b7 p(chosen token) per decoder layer")
    assert tab.attention.kind_combo.currentText() == "p(chosen token) per decoder layer"
    arrays, sidecar = tab.quantity.export_extra()  # exported as shown, its layout said
    np.testing.assert_allclose(arrays["logit_lens_lens"][0, 0], lens.chosen_prob.T, rtol=1e-5, atol=1e-6)
    assert sidecar["quantity"]["layout"].startswith("[1, 1, output tokens, decoder layers]")


def test_a_foil_from_the_chart_shows_in_the_selector_and_its_title(qtbot, loaded):
    tab = translate(qtbot, loaded, SENTENCE)
    tab.go_to(1)
    step = tab.document.steps[1]
    foil = next(token for token, _ in step.topk if token != step.token)
    assert not why_action(tab, foil).isChecked()
    why_action(tab, foil).trigger()  # "Why this and not ...?" in the top-k chart's menu
    qtbot.waitUntil(lambda: tab.quantity.result is not None and tab.quantity.result.settings.get("foil") == foil,
                    timeout=30000)
    bar, key = tab.quantity.bar, tab.quantity.result.quantity.key
    assert bar.key == key == "saliency"  # the first method that takes a foil, shown in the selector
    foils = settings_menu(bar)["Contrast with (foil)"]
    assert foils[repr(foil)].isChecked() and not foils["None (not contrastive)"].isChecked()
    assert tab.topk_view.foil_shown == foil and why_action(tab, foil).isChecked()
    assert tab.search.panel.foil_now == foil  # the n-best list's menu checks the same foil
    tab.attention.heatmap.repaint()
    assert tab.attention.heatmap.data().title.startswith(f"Contrastive saliency vs {foil!r} (foil) \u00b7 ")


def test_a_foil_from_the_selector_shows_in_the_chart_and_none_ends_the_contrast(qtbot, loaded):
    tab = translate(qtbot, loaded, SENTENCE)
    tab.go_to(1)
    ready(qtbot, loaded, "integrated-gradients")
    bar = tab.quantity.bar
    step = tab.document.steps[1]
    offered = settings_menu(bar)["Contrast with (foil)"]
    candidates = [token for token, _ in step.topk if token != step.token]
    assert list(offered) == ["None (not contrastive)", *(repr(t) for t in candidates)]  # the step's others
    foil = candidates[0]
    offered[repr(foil)].trigger()
    qtbot.waitUntil(lambda: tab.quantity.result is not None and tab.quantity.result.settings.get("foil") == foil,
                    timeout=30000)
    assert bar.key == "integrated-gradients" and tab.topk_view.foil_shown == foil
    assert why_action(tab, foil).isChecked()
    tab.attention.heatmap.repaint()
    title = tab.attention.heatmap.data().title
    assert title.startswith(f"Contrastive integrated gradients vs {foil!r} (foil) \u00b7 32 steps \u00b7 "
                            "baseline zero \u00b7 "), title
    settings_menu(bar)["Contrast with (foil)"]["None (not contrastive)"].trigger()
    qtbot.waitUntil(lambda: tab.quantity.result is not None and tab.quantity.result.settings.get("foil") is None,
                    timeout=30000)
    assert tab.topk_view.foil_shown is None and not why_action(tab, foil).isChecked()
    tab.attention.heatmap.repaint()
    assert tab.attention.heatmap.data().title.startswith("Integrated gradients \u00b7 32 steps \u00b7 baseline zero")


def test_the_title_names_the_quantity_and_its_settings():
    ig = Quantity("integrated-gradients", "Integrated gradients", "", reads=("foil", "steps", "baseline", "target"))
    assert quantity_title(ig) == "Integrated gradients \u00b7 32 steps \u00b7 baseline zero"
    assert quantity_title(ig.with_settings(foil="dog", steps=64)) == \
        "Contrastive integrated gradients vs 'dog' (foil) \u00b7 64 steps \u00b7 baseline zero"
    alti = Quantity("alti-plus", "ALTI+", "")
    assert quantity_title(alti) == "ALTI+"
    patching = Quantity("patching", "Activation patching", "", reads=("corrupt",))
    assert quantity_title(patching.with_settings(corrupt="3=Katze")) == "Activation patching \u00b7 corrupted: 3=Katze"
    saliency = Quantity("saliency", "Saliency", "", reads=("foil", "aggregate", "target"))
    assert quantity_title(saliency.with_settings(foil=" ")) == "Contrastive saliency vs '\u2423' (foil)"  # drawn
    choices = {name: values for name, _, values, _ in setting_choices(saliency.with_settings(foil="cat"), ["dog"])}
    assert choices["foil"] == (None, "cat", "dog")  # the foil now stays offered beside the step's candidates
    assert value_text("foil", None) == "None (not contrastive)" and value_text("steps", 32) == "32"
