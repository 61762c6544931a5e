"""Sinks (issue 27): which tokens are sinks, and maps without their columns renormalised row by row."""

import numpy as np
import pytest

from attnviz.engine.analysis.sinks import is_sink, sink_columns, without_sinks


def test_sinks_are_specials_punctuation_and_language_tags():
    assert [is_sink(t) for t in ("<sos>", "<eos>", ".", "\u2581,", "?!", ">>de<<", "__fr__", "de_DE", "deu_Latn")] \
        == [True] * 9
    assert not any(is_sink(t) for t in ("dog", "\u2581dog", "<unk>", "U.S.", "de", "a_b"))


def test_an_llm_prompts_template_markers_and_line_breaks_are_sinks():
    assert all(is_sink(t) for t in ("<|im_start|>", "<bos>", "<start_of_turn>", "<|eot_id|>", "\n", "\n\n"))
    assert not any(is_sink(t) for t in ("\u2581", "<unk>", "<Hund", "a<b>c", "\u2581user"))


def test_without_sinks_drops_the_columns_and_renormalises_every_row():
    maps = np.array([[[0.5, 0.2, 0.3], [0.0, 0.0, 1.0]], [[-0.2, 0.6, 0.2], [0.1, 0.1, 0.8]]])  # [2, 2, 3]
    out = without_sinks(maps, sink_columns(["<sos>", "dog", "cat"]))
    np.testing.assert_allclose(out, [[[0.4, 0.6], [0.0, 1.0]], [[0.75, 0.25], [1 / 9, 8 / 9]]])
    zero = without_sinks(np.array([[0.7, 0.3, 0.0]]), np.array([True, True, False]))
    assert zero.tolist() == [[0.0]]  # nothing left in the row: zero, not NaN
    signed = without_sinks(np.array([[0.5, -1.0, 3.0]]), np.array([True, False, False]))
    np.testing.assert_allclose(signed, [[-0.25, 0.75]])  # by absolute values: signs kept
    every = np.array([[0.5, 0.5]])
    assert without_sinks(every, np.array([True, True])) is every
    with pytest.raises(ValueError, match=r"sink mask of shape \(2,\) for maps with 3 columns"):
        without_sinks(maps, np.array([True, False]))
