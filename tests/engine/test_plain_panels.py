"""The output projection's panel layout (``engine.plain.panels``): the same products and rows as the table it
rearranged in place, for every vocabulary size around a panel's width."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine.plain.panels import PANEL, Panels


@pytest.mark.parametrize("vocab", [1, PANEL - 1, PANEL, PANEL + 1, 3 * PANEL + 17])
@pytest.mark.parametrize("rows", [1, 5, 40])
def test_panels_compute_the_tables_product_and_rows(vocab: int, rows: int) -> None:
    rng = np.random.default_rng(vocab * 100 + rows)
    table = rng.standard_normal((vocab, 24)).astype(np.float32)
    bias = rng.standard_normal(vocab).astype(np.float32)
    original = table.copy()
    x = rng.standard_normal((rows, 24)).astype(np.float32)
    panels = Panels(table, bias)
    assert panels.shape == (vocab, 24)
    expected = x.astype(np.float64) @ original.T.astype(np.float64) + bias
    np.testing.assert_allclose(panels(x), expected, rtol=1e-5, atol=1e-5)
    ids = rng.integers(0, vocab, size=(3, 7))
    assert np.array_equal(panels.rows(ids), original[ids])  # copied, not computed: exact
    assert sum(a.size for a in panels.arrays()) == original.size


def test_panels_rearrange_the_table_in_place_without_a_copy() -> None:
    table = np.arange(2 * PANEL * 3, dtype=np.float32).reshape(2 * PANEL, 3)
    panels = Panels(table, np.zeros(2 * PANEL, np.float32))
    assert np.shares_memory(panels.panels, table)
    assert table[0].tolist() == [0.0, 3.0, 6.0]  # the first panel's first row: column 0 of its rows


def test_panels_refuse_a_table_they_cannot_rearrange() -> None:
    with pytest.raises(ValueError, match="C-contiguous float32"):
        Panels(np.zeros((PANEL, 4), np.float64), np.zeros(PANEL, np.float32))
    with pytest.raises(ValueError, match="C-contiguous float32"):
        Panels(np.zeros((4, PANEL), np.float32).T, np.zeros(PANEL, np.float32))
