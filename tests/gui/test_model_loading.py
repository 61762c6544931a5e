"""While a model loads, nothing translates with the model it replaces: the Translate button says which model is
loading, Enter waits and translates with the new model once it is here, a what-if is refused with a message, and the
picker and status bar never name a model other than the one in use (a failed load returns the picker to it)."""

import os

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from attnviz.gui.translate.loading import loading_state
from attnviz.session.translate.mode import mode_texts
from tests.gui.conftest import translate


def test_the_loading_state_words():
    texts = mode_texts(False, "German", True)
    state = loading_state(texts, True, "fr-en-multi30k")
    assert (state.button, state.ready, state.typing) == ("Loading fr-en-multi30k\u2026", False, True)
    assert state.source_label == "&Sentence:"  # not the language of the model being replaced
    assert "fr-en-multi30k is loading" in state.tip
    ready = loading_state(texts, True, None)
    assert (ready.button, ready.tip, ready.ready, ready.typing) == ("Tr&anslate", texts.button_tip, True, True)
    assert ready.source_label == "German &sentence:"
    assert not loading_state(mode_texts(False, "", False), False, None).typing  # no model, none coming


def test_enter_while_a_model_loads_waits_for_it(qtbot, loaded, trained_translator, tmp_path):
    window, tab = loaded, loaded.translate_tab
    old = window.translator
    tab.playback.instant_check.setChecked(True)
    other = tmp_path / "toy-two.safetensors"
    trained_translator.save(other, name="toy two")
    window.load_model(str(other))
    assert window.model_label.text() == "Loading toy-two\u2026"
    assert tab.translate_button.text() == "Loading toy-two\u2026" and not tab.translate_button.isEnabled()
    assert not tab.examples_combo.isEnabled() and tab.source_edit.isEnabled()
    assert tab.lang_label.text() == "&Sentence:"
    tab.source_edit.setText("q1 q2 q3")
    qtbot.keyClick(tab.source_edit, Qt.Key.Key_Return)
    assert tab.document.request is None and not tab.worker.is_running()  # the old model decodes nothing
    tab.search.what_if("w1")
    assert tab.message.messages() == ["Wait until toy-two has loaded."]
    qtbot.waitUntil(lambda: window.translator is not old and tab.document.finished, timeout=30000)
    assert window.translator.metadata["path"] == str(other) and tab.translator is window.translator
    assert tab.document.request.text == "q1 q2 q3" and tab.output_view.tokens()[-1] == "<eos>"
    assert tab.translate_button.text() == "Tr&anslate" and tab.translate_button.isEnabled()
    assert window.model_label.text() == f"{window.translator.card.languages} · " \
                                        f"{window.translator.card.parameters:,} parameters"
    assert window.model_combo.currentData() == str(other)


def test_a_failed_load_returns_the_picker_to_the_model_in_use(qtbot, loaded, tmp_path, monkeypatch):
    window, tab = loaded, loaded.translate_tab
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    in_use, label = window.translator.metadata["path"], window.model_label.text()
    bad = tmp_path / "broken.safetensors"
    bad.write_text("garbage")
    window.settings.setValue("models/recent", [str(bad), *window.recent_files()])
    window.refresh_models()
    index = window.model_combo.findData(str(bad))
    window.model_combo.setCurrentIndex(index)
    window.model_combo.activated.emit(index)  # picked in the picker
    assert tab.gate.name == "broken" and window.model_label.text() == "Loading broken\u2026"
    qtbot.waitUntil(lambda: bool(shown), timeout=20000)
    assert window.model_combo.currentData() == in_use and window.model_label.text() == label
    assert tab.gate.name is None and tab.translate_button.isEnabled() and tab.translate_button.text() == "Tr&anslate"
    translate(qtbot, window, "q1 q2")  # the model in use still translates, at once
    assert tab.output_view.tokens()[-1] == "<eos>"


def test_the_picker_always_shows_the_model_in_use(qtbot, loaded):
    in_use = loaded.translator.metadata["path"]
    loaded.settings.setValue("models/recent", [])  # e.g. pushed out by eight newer files
    loaded.refresh_models()
    assert loaded.model_combo.currentData() == in_use and "toy" in loaded.model_combo.currentText()


def test_the_picker_names_the_model_loading_at_startup(qtbot, window, toy_checkpoint):
    """The first model loads with none in use: the picker is not blank, it names that model, marked as loading."""
    assert window.translator is None
    window.load_model(toy_checkpoint)
    assert window.model_combo.currentData() == toy_checkpoint
    assert "toy" in window.model_combo.currentText() and window.model_combo.currentText().startswith("Loading\u2026 ")
    if os.environ.get("ATTNVIZ_SHOTS"):
        window.resize(1024, 700)
        window.grab().save(os.path.join(os.environ["ATTNVIZ_SHOTS"], "loading-1024x700.png"))
    qtbot.waitUntil(lambda: window.translator is not None, timeout=20000)
    assert window.model_combo.currentData() == toy_checkpoint
    assert "toy" in window.model_combo.currentText() and "Loading" not in window.model_combo.currentText()
