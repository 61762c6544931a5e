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

