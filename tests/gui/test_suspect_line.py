"""The suspect-translation score of the sentence shown in the Translate tab (issues 27 and 38): once the
translation finishes, the line under the translated text shows the engine's components for that translation (ALTI+'s
source share from a teacher-forced pass on its output) and the verdict, calibrated where the model was; the tooltip
names each component's direction and the AUROC it reached on the model, or says the model is not calibrated."""

import math
import random

from attnviz.engine.attribution.suspect.calibrate import calibration_steps
from attnviz.engine.attribution.suspect.components import LABELS
from attnviz.engine.attribution.suspect.corpus import translation_components
from attnviz.engine.attribution.suspect.rule import judge
from attnviz.engine.attribution.suspect.store import store_calibration
from attnviz.gui.translate.suspect_line import SHOWN, line
from tests.gui.conftest import translate
from tests.helpers import toy_pair


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
    assert text.startswith(f"Suspect score: {judge(expected, None).text()} \u2014 ")  # the verdict first, in sight
    assert "(not calibrated: log-prob / token alone)" in text or "(not calibrated)" in text
    assert suspect.label.isVisible()
    tip = suspect.label.toolTip()
    for words in ("Guerreiro et al. 2023", "Berard et al. 2019", "Ferrando et al. 2022", "Dale et al. 2023",
                  "Low is suspect", "High is suspect", "Not calibrated (not calibrated): the verdict reads "
                  "log-prob / token alone, suspect below -3.5", "Run `attnviz calibrate -m MODEL`"):
        assert words in tip


def test_a_calibrated_model_gives_its_aurocs_in_the_tooltip_and_its_rule_in_the_line(qtbot, window,
                                                                                    trained_translator, tmp_path):
    rng = random.Random(5)
    pairs = [toy_pair(rng) for _ in range(24)]
    sources, references = [" ".join(s) for s, _ in pairs], [" ".join(t) for _, t in pairs]
    calibration = list(calibration_steps(trained_translator, sources, references, corpus="toy"))[-1]
    path = tmp_path / "calibrated.safetensors"
    trained_translator.save(path, name="toy")
    store_calibration(path, calibration)
    window.load_model(str(path))
    qtbot.waitUntil(lambda: window.translator is not None, timeout=20000)
    tab = translate(qtbot, window, "q1 q2 q3 q1")
    suspect = tab.quantity.suspect
    qtbot.waitUntil(lambda: suspect.found is not None, timeout=20000)
    tip = suspect.label.toolTip()
    assert "Calibrated on toy, 24 sentences" in tip and "kept in the checkpoint" in tip
    for name, fit in calibration.components.items():
        if math.isfinite(fit.auroc):
            assert f"{LABELS[name]}: AUROC {fit.auroc:.3f} (" in tip, name
    assert "sink mass: AUROC" in tip and "shown, never voted" in tip
    assert suspect.label.text() == line(suspect.found, calibration)
    assert suspect.label.text().startswith(f"Suspect score: {judge(suspect.found, calibration).text()} \u2014 ")
    assert "calibrated score" in suspect.label.text()
    assert "not calibrated" not in suspect.label.text()


def test_the_tabs_under_the_line_stay_put_while_its_figures_arrive(qtbot, loaded):
    """The line is as tall from "computing..." on as with its figures: the side column's tabs do not jump."""
    loaded.resize(1366, 768)
    loaded.show()
    qtbot.waitExposed(loaded)
    tab = loaded.translate_tab
    suspect = tab.quantity.suspect
    seen: list[tuple[str, int]] = []

    def record() -> None:
        seen.append((suspect.label.text(), tab.search.side.mapTo(tab, tab.search.side.rect().topLeft()).y()))

    original = suspect.worker.start

    def start(job) -> None:
        original(job)
        text = suspect.label.text()  # read at once: a fast machine's result may arrive during the wait below
        tab.layout_state.fit_side()
        qtbot.wait(1)
        record()  # where the tabs are before the figures
        seen[-1] = (text, seen[-1][1])

    suspect.worker.start = start
    translate(qtbot, loaded, "q1 q2 q3 q1")
    qtbot.waitUntil(lambda: suspect.found is not None, timeout=20000)
    qtbot.wait(50)
    record()
    assert seen[0][0] == "Suspect score: computing..." and seen[-1][0].startswith("Suspect score: ")
    label = suspect.label
    assert label.height() >= label.heightForWidth(label.width()) - 1  # the reserve holds the whole line
    assert seen[0][1] == seen[-1][1], seen  # the tabs did not move
