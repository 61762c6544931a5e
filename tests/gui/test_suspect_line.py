"""The suspect-translation score of the sentence shown in the Translate tab (issue 27): once the translation
finishes, the line under the translated text shows the engine's components for that translation (ALTI+'s source
share from a teacher-forced pass on its output) and a verdict; the tooltip names each component's direction."""

import math

from attnviz.engine.attribution.suspect import LABELS
from attnviz.engine.attribution.suspect_corpus import translation_components
from attnviz.gui.translate.suspect_line import SHOWN, line, verdict
from tests.gui.conftest import translate


def test_the_line_shows_the_engines_components_for_the_sentence(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3 q1")
    suspect = tab.quantity.suspect
    qtbot.waitUntil(lambda: suspect.found is not None, timeout=20000)
    expected = translation_components(loaded.translator, tab.document.translation(-1))
    assert set(SHOWN) <= set(expected)
    for name in SHOWN:
        assert math.isfinite(expected[name]), name  # the toy transformer has every component, ALTI+ included
        assert math.isclose(suspect.found[name], expected[name], rel_tol=1e-9, abs_tol=1e-12), name
    text = suspect.label.text()
    assert text == line(expected)
    for name in SHOWN:
        assert f"{LABELS[name]} {expected[name]:.3f}" in text
    assert text.endswith(verdict(expected))
    assert suspect.label.isVisible()
    tip = suspect.label.toolTip()
    for words in ("Guerreiro et al. 2023", "Berard et al. 2019", "Ferrando et al. 2022", "Dale et al. 2023",
                  "Low is suspect", "High is suspect"):
        assert words in tip


def test_the_verdict_names_the_components_past_their_line():
    found = {"seq_logprob": -3.0, "mean_logprob": -0.5, "attn_ign_src": 0.0, "wass_to_unif": 0.1,
             "alti_source_share": 0.6, "sink_mass": 0.1}
    assert verdict(found) == "no sign of a hallucination"
    assert verdict(found | {"attn_ign_src": 0.75, "alti_source_share": 0.2}) == "suspect: Attn-ign-SRC, ALTI+ source"
    assert "ALTI+" not in line(found | {"alti_source_share": math.nan})  # absent where not defined
