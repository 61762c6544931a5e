"""A multilingual folder (NLLB-200 shaped, random, written without transformers) in the app: opened as a folder,
its From/Into lists shown (hidden for a model of one pair), a choice applied to the next translation, the source
tag read first and the target tag forced first; every letter still unique with the lists on screen."""

from __future__ import annotations

import json
import shutil

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from attnviz.gui.shortcuts import mnemonic
from attnviz.gui.translate.step_model import FORCED_RUNNER
from tests.folder_samples import write_fairseq_folder
from tests.gui.conftest import load, translate
from tests.gui.test_keyboard import assert_unique

SENTENCE = "Zwei Hunde spielen im Schnee."


@pytest.fixture(scope="module")
def nllb_folder(tmp_path_factory):
    return str(write_fairseq_folder(tmp_path_factory.mktemp("gui-nllb") / "nllb-tiny-random", "nllb"))


def test_the_languages_are_picked_in_the_translate_tab(qtbot, window, nllb_folder):
    tab = load(qtbot, window, nllb_folder)
    picker = tab.languages
    assert picker.isVisible()
    assert picker.src_combo.currentText() == "Guess from the text"
    assert picker.tgt_combo.currentText() == "eng_Latn (English)"
    assert tab.lang_label.text() == "Source &sentence:"
    translate(qtbot, window, SENTENCE)
    assert tab.document.steps[0].token == "eng_Latn" and tab.document.steps[0].forced
    assert_forced_first(tab, "eng_Latn")
    assert any("guessed from the text: deu_Latn" in w for w in tab.document.encoder.warnings)
    before = window.translator
    picker.src_combo.setCurrentIndex(picker.src_combo.findData("fra_Latn"))
    picker.tgt_combo.setCurrentIndex(picker.tgt_combo.findData("deu_Latn"))
    picker.tgt_combo.activated.emit(picker.tgt_combo.currentIndex())
    assert (window.translator.languages.src, window.translator.languages.tgt) == ("fra_Latn", "deu_Latn")
    # a view of the same network: the translator a job may still be running on keeps its pair
    assert window.translator is not before and window.translator.model is before.model
    assert (before.languages.src, before.languages.tgt) == (None, "eng_Latn")
    assert tab.translator is window.translator and tab.document.request is None  # the old pair's decode is gone
    assert (picker.src_combo.currentData(), picker.tgt_combo.currentData()) == ("fra_Latn", "deu_Latn")
    assert "-> German" in window.model_label.text()  # the status bar names the view's languages
    translate(qtbot, window, SENTENCE)
    assert tab.document.steps[0].token == "deu_Latn"
    assert tab.document.encoder.src_tokens[0] == "fra_Latn"
    assert not any("guessed" in w for w in tab.document.encoder.warnings)
    assert_unique(window)


def test_a_folders_configured_decoding_is_a_choice_of_the_decoding_list(qtbot, window, nllb_folder, tmp_path):
    folder = tmp_path / "nllb-configured"
    shutil.copytree(nllb_folder, folder)
    (folder / "generation_config.json").write_text(json.dumps({"num_beams": 4, "max_length": 200}))
    tab = load(qtbot, window, str(folder))
    row = tab.sampling_row
    assert [row.sampling_combo.itemText(i) for i in range(row.sampling_combo.count())] == [
        "Greedy", "Sampled", "Beam search", "Model's own (beam 4)"]
    assert row.sampling_combo.currentIndex() == 3 and row.uses_configured() and row.mode == "beam"
    assert mnemonic(row.decoding_label.text()) == "g" and row.decoding_label.buddy() is row.sampling_combo
    assert row.drawn(row.configured.replace(beam=1)).beam == 4 and not row.beam_spin.isEnabled()
    row.sampling_combo.setCurrentIndex(0)  # attnviz's own greedy search
    assert not row.uses_configured() and row.mode == "greedy"
    row.sampling_combo.setCurrentIndex(3)
    assert_unique(window)
    translate(qtbot, window, SENTENCE)
    assert_forced_first(tab, "eng_Latn")  # the beam search's path shows the forced tag as the greedy one does
    load(qtbot, window, nllb_folder)  # a folder that configures nothing: attnviz's three choices only
    assert row.sampling_combo.count() == 3 and not row.uses_configured()


def assert_forced_first(tab, tag: str) -> None:
    """The forced tag reads as forced in the step table and the candidates view, with no runner-up or choice."""
    model = tab.step_model
    assert [model.index(0, c).data() for c in (1, 4)] == [f"{tag} (forced)", FORCED_RUNNER]
    assert model.index(1, 4).data() != FORCED_RUNNER and "(forced)" not in model.index(1, 1).data()
    tab.document.go_to(0)
    view = tab.topk_view
    assert view.accessible_value().startswith(f"Forced: {tag}, not chosen; the model's own top")
    assert not any(view._is_chosen(t) for t, _ in view._items)


def test_a_model_of_one_pair_shows_no_language_lists(qtbot, loaded):
    assert not loaded.translate_tab.languages.isVisible()


@pytest.mark.parametrize("family", ["m2m100", "mbart50"])
def test_a_dropped_multilingual_folder_opens_with_its_languages(qtbot, window, tmp_path, family):
    folder = write_fairseq_folder(tmp_path / f"{family}-tiny-random", family)
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(folder))])
    window.dropEvent(QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, data, Qt.MouseButton.NoButton,
                                Qt.KeyboardModifier.NoModifier))
    qtbot.waitUntil(lambda: window.translator is not None and window.translator.metadata["path"] == str(folder),
                    timeout=20000)
    picker = window.translate_tab.languages
    assert picker.isVisible() and picker.tgt_combo.currentData() == {"m2m100": "__en__", "mbart50": "en_XX"}[family]
    tab = translate(qtbot, window, SENTENCE)
    assert tab.document.encoder.src_tokens[0] == {"m2m100": "__de__", "mbart50": "de_DE"}[family]
