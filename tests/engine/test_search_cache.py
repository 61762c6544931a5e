"""The search's caches (shared encoder keys/values, self-attention buffers that grow in place) against the output
of the search before them (``tests/engine/data/search_reference.npz``, see ``search_reference``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import DecodeStep
from attnviz.engine.models.cache import grouping, grow_in_place, select_rows
from attnviz.engine.models.quantize import quantize_int8
from tests.engine.search_reference import MODELS, capture, toy

REFERENCE = Path(__file__).parent / "data" / "search_reference.npz"


@pytest.fixture(scope="module")
def reference():
    with np.load(REFERENCE) as data:
        return {key: data[key] for key in data.files}


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal arrays, bit for bit (NaN marks a score that is not there, e.g. a live node's normalised score)."""
    return np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def _differing(name: str, reference: dict) -> tuple[dict, list[str]]:
    now = capture(name)
    expected = {k: v for k, v in reference.items() if k.startswith(f"{name}/")}
    assert sorted(now) == sorted(expected)  # the same steps, nodes and rows: the same tree
    return now, [k for k in expected if not same(now[k], expected[k])]


@pytest.mark.parametrize("name", MODELS)
def test_greedy_and_batched_search_are_bit_for_bit(name, reference):
    now, differing = _differing(name, reference)
    exact = [k for k in now if "/greedy/" in k or "/batch/" in k or k.endswith(("/token", "/status", "/node"))
             or k.endswith("/ranking")]
    assert exact and not set(exact) & set(differing)


@pytest.mark.parametrize("name", MODELS)
def test_beam_tree_attention_and_scores_match(name, reference):
    """A beam step now reads a sentence's cross-attention keys with its hypotheses' queries side by side (one
    matrix product instead of one per hypothesis), which may change the last bit of a cross-attention score and
    what follows it; and it projects its rows to logits as W @ h^T (``project_rows``), which may change a logit's
    last bits. The tree is identical and every number within a few float32 ulps. Models without cross-attention
    (char LM) keep every attention row bit for bit: only the projection's probabilities and scores may move."""
    now, differing = _differing(name, reference)
    for key in differing:
        np.testing.assert_allclose(now[key], reference[key], rtol=2e-6, atol=2e-7, err_msg=key)
    if name == "char-lm":
        assert all(key.endswith(("/probability", "/score")) for key in differing)


def test_capturing_steps_project_weight_major():
    """One row: the same matrix-vector product as ``project`` (greedy's logits bit for bit); several rows: W @ h^T
    with the bias, within float32 rounding of the row-major product; a quantised output layer keeps ``project``."""
    model = toy("marian-wide").model
    torch.manual_seed(0)
    hidden = torch.randn(5, model.out_proj.in_features)
    weight, bias = model.out_proj.weight, model.out_proj.bias
    with torch.inference_mode():
        assert torch.equal(model.project_rows(hidden[:1]), model.project(hidden[:1]))
        rows = model.project_rows(hidden)
        assert rows.is_contiguous() and torch.equal(rows, torch.addmm(bias[:, None], weight, hidden.t()).t())
        torch.testing.assert_close(rows, model.project(hidden), rtol=0, atol=1e-6)  # logits of magnitude ~1
        int8 = toy("marian-wide").model
        quantize_int8(int8)
        assert torch.equal(int8.project_rows(hidden), int8.project(hidden))


def test_cache_reaches_the_length_limit():
    """The char LM's table holds 12 positions: a greedy decode may run to the last one and no further."""
    translator = toy("char-lm")
    limit = translator.model.max_target_len
    steps = [e for e in translator.steps("a", DecodeConfig(max_len=100)) if isinstance(e, DecodeStep)]
    assert len(steps) == limit and steps[-1].self_attention.shape[-1] == limit
    model = translator.model
    cache = model.start(model.encode(torch.zeros(1, 0, dtype=torch.long)))
    model.step(torch.tensor([1]), cache, False)
    buffer = cache.layers[0].self_k
    assert buffer.size(2) == limit  # allocated once for the whole table (16 would pass the limit), written in place
    for _ in range(limit - 1):
        model.step(torch.tensor([1]), cache, False)
        assert cache.layers[0].self_k is buffer
    with pytest.raises(ValueError, match="sequence length 13 exceeds the model's 12 positions"):
        model.step(torch.tensor([1]), cache, False)


def test_buffer_grows_in_place_and_doubles():
    buffer, seen = None, []
    for t in range(40):
        new = torch.full((2, 1, 1, 3), float(t))
        buffer, filled = grow_in_place(buffer, new, t, None)
        seen.append(buffer.size(2))
        assert filled.shape == (2, 1, t + 1, 3) and torch.equal(filled[0, 0, :, 0], torch.arange(t + 1.0))
    assert sorted(set(seen)) == [16, 32, 64]
    assert grow_in_place(None, torch.zeros(1, 1, 5, 2), 0, 3)[0].size(2) == 5  # never less than what is written


def test_selection_keeps_sentences_together_or_gathers():
    assert grouping(torch.tensor([0, 0, 1, 3, 3, 2]), 2, 2) == 3  # sentence 0's rows, then sentence 1's
    assert grouping(torch.tensor([2, 0]), 2, 2) is None  # sentence 1 before sentence 0
    assert grouping(torch.tensor([0, 2]), 3, 1) is None  # greedy dropping a finished sentence
    buffer = torch.arange(24.0).view(3, 1, 4, 2)
    picked = select_rows(buffer, torch.tensor([2, 0]), 3)
    assert torch.equal(picked[:, :, :3], buffer[[2, 0], :, :3]) and picked.size(2) == 4
