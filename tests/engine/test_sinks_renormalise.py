"""Hiding sinks (engine.analysis.sinks): <sos>, <eos>, punctuation and language tags are found, and the rows of a
map without them are renormalised to sum to 1."""

from __future__ import annotations

import numpy as np

from attnviz.engine.analysis.sinks import WHY, sink_columns, without_sinks


def test_sinks_are_specials_punctuation_and_language_tags():
    tokens = ["<sos>", ">>fra<<", "__de__", "deu_Latn", "de_DE", "\u2581,", "Hund", "\u2581Haus", "<eos>"]
    np.testing.assert_array_equal(sink_columns(tokens), [1, 1, 1, 1, 1, 1, 0, 0, 1])
    assert "sum to 1" in WHY and "\n" not in WHY


def test_rows_without_sinks_sum_to_one():
    rng = np.random.default_rng(0)
    maps = rng.random((2, 3, 4, 5))
    maps /= maps.sum(-1, keepdims=True)
    sinks = sink_columns(["<sos>", "a", ".", "b", "<eos>"])
    kept = without_sinks(maps, sinks)
    assert kept.shape == (2, 3, 4, 2)
    np.testing.assert_allclose(kept.sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(kept[..., 0] / kept[..., 1], maps[..., 1] / maps[..., 3])  # proportions kept
    only_sinks = np.zeros((1, 5))
    only_sinks[0, 0] = 1.0
    np.testing.assert_array_equal(without_sinks(only_sinks, sinks), 0)  # nothing left: a zero row, not NaN
