"""The Translate tab says when the translation shown was cut at Max length, in the command line's words, in its
status bar and in the step table's last row, every time (issue 38)."""

import pytest

from attnviz.gui.translate.step_model import AT_LIMIT
from tests.gui.test_search_view import TEXT, decode

CUT = "the translation reached the limit of 2 tokens and was cut there (raise Max length to let it finish)"


@pytest.mark.parametrize("mode", ["greedy", "beam"])
def test_a_translation_cut_at_max_length_says_so(qtbot, loaded, mode):
    tab = loaded.translate_tab
    tab.playback.max_len_spin.setValue(2)
    decode(qtbot, loaded, mode=mode)
    assert len(tab.document.steps) == 2 and tab.document.steps[-1].token != "<eos>"
    assert CUT in tab.message.messages()
    assert tab.message.isVisibleTo(tab)
    assert loaded.statusBar().currentMessage() == ("Translated: 2 tokens. Stopped at the length limit of 2 tokens: "
                                                   "raise Max length to let it finish.")
    model = tab.step_model
    assert model.rowCount() == 2 and model.index(1, 1).data().endswith(AT_LIMIT)
    assert not model.index(0, 1).data().endswith(AT_LIMIT)
    assert "stopped here, at the length limit of 2 tokens" in model.index(1, 3).data(3)  # the row's tooltip


def test_a_translation_that_ends_says_nothing_of_the_limit(qtbot, loaded):
    tab = loaded.translate_tab
    tab.playback.max_len_spin.setValue(50)
    decode(qtbot, loaded, text=TEXT)
    assert tab.document.steps[-1].token == "<eos>"
    assert not [m for m in tab.message.messages() if "reached the limit" in m]
    assert "length limit" not in loaded.statusBar().currentMessage()
    assert not any(AT_LIMIT in tab.step_model.index(r, 1).data() for r in range(tab.step_model.rowCount()))



def test_max_length_is_each_models_own_and_survives_a_restart(qtbot, window, settings, toy_checkpoint, tmp_path,
                                                                trained_translator):
    from attnviz.engine.config import DecodeConfig
    from attnviz.gui.main_window import MainWindow
    from tests.gui.conftest import load

    other = tmp_path / "other.safetensors"
    trained_translator.save(other, name="other")
    tab = load(qtbot, window, toy_checkpoint)
    spin = tab.playback.max_len_spin
    spin.setValue(20)  # set for one model...
    load(qtbot, window, str(other))
    assert spin.value() == DecodeConfig().max_len  # ... the next opens on the default, not cut at 20
    spin.setValue(7)
    load(qtbot, window, toy_checkpoint)
    assert spin.value() == 20
    window.close()  # saves the settings
    again = MainWindow(settings)
    qtbot.addWidget(again)
    load(qtbot, again, str(other))
    assert again.translate_tab.playback.max_len_spin.value() == 7


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"a": "x", "b": 0, "c": true, "d": 5000}'])
def test_hostile_stored_lengths_are_set_aside(text):
    from attnviz.gui.translate.playback import remembered_lengths

    assert remembered_lengths(text) == {}
    assert remembered_lengths('{"m.safetensors": 30, "x": 0}') == {"m.safetensors": 30}
