"""DecodeSession (Qt-free): every step kept, views cut at a step, rows and columns for hovering."""

import numpy as np

from attnviz.gui.translate.session import DecodeSession


def session_of(translator, text):
    session = DecodeSession(translator.detokenize)
    for event in translator.steps(text):
        session.add(event)
    return session


def test_views_are_cut_at_the_step(trained_translator):
    s = session_of(trained_translator, "q1 q2 q3")
    assert s.kinds() == ["encoder", "decoder", "cross"] and len(s.steps) == 4
    matrix, rows, cols, highlight = s.heatmap("cross", 1, None, 1)
    assert matrix.shape == (2, 5) and rows == ("w3", "w2") and cols[0] == "<sos>" and highlight == 1
    np.testing.assert_allclose(matrix, s.maps("cross", 1)[1].mean(axis=0))
    matrix, rows, cols, highlight = s.heatmap("decoder", 0, 2, 2)
    assert matrix.shape == (3, 3) and cols == ("<sos>", "w3", "w2") and np.all(np.triu(matrix, 1) == 0)
    assert s.heatmap("encoder", 1, 0, 0)[3] is None and s.heatmap("encoder", 1, 0, 0)[0].shape == (5, 5)


def test_rows_and_columns_for_hover(trained_translator):
    s = session_of(trained_translator, "q1 q2 q3")
    row = s.cross_row(2, 1, 3)
    np.testing.assert_allclose(row, s.steps[2].cross_attention[1, 3])
    column = s.cross_column(1, 3, 0, None)
    np.testing.assert_allclose(column, s.maps("cross", 3)[0].mean(axis=0)[:, 1])
    assert s.cross_row(9, 0, None) is None and s.cross_column(99, 3, 0, None) is None


def test_full_translation_equals_the_engine(trained_translator):
    s = session_of(trained_translator, "q4 q5")
    t = trained_translator.translate("q4 q5")
    assert s.translation(-1).text == t.text
    for kind in t.attention:
        np.testing.assert_array_equal(s.translation(-1).attention[kind], t.attention[kind])
