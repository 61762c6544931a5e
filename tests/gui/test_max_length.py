"""The Translate tab says when the translation shown was cut at Max length, in the command line's words."""

import pytest

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


def test_a_translation_that_ends_says_nothing_of_the_limit(qtbot, loaded):
    tab = loaded.translate_tab
    tab.playback.max_len_spin.setValue(50)
    decode(qtbot, loaded, text=TEXT)
    assert tab.document.steps[-1].token == "<eos>"
    assert not [m for m in tab.message.messages() if "reached the limit" in m]
