"""The search's caches (shared encoder keys/values, self-attention buffers that grow in place) against the output
of the search before them (``tests/engine/data/search_reference.npz``, see ``search_reference``), and batched search
against one sentence at a time.

The stored numbers came from one CPU; another CPU's kernels round differently (MKL and oneDNN pick kernels by CPU,
``ATEN_CPU_CAPABILITY`` by instruction set). So the reference is compared within float32 tolerances, and its choices
(tokens, the beam tree, the ranking) exactly only because every choice is clear: no two candidates are nearer than
rounding could move them (``clear_choices``). What must be exact is compared in one process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from attnviz.engine.config import DecodeConfig
from attnviz.engine.corpus.batching import pad_batch
from attnviz.engine.events import BeamStep, DecodeStep
from attnviz.engine.models.cache import grouping, grow_in_place, select_rows
from attnviz.engine.models.quantize import quantize_int8
from attnviz.engine.search.torch_batch import beam_batch, greedy_batch
from tests.engine.search_reference import MODELS, PREFIXES, SENTENCES, capture, toy

REFERENCE = Path(__file__).parent / "data" / "search_reference.npz"
# Any IEEE float32 kernel keeps these toy models' probabilities, attention weights and scores (sums of up to nine
# log-probabilities) within this of each other; a choice is clear when its candidates are twice as far apart.
RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module")
def reference():
    with np.load(REFERENCE) as data:
        return {key: data[key] for key in data.files}


def texts_of(name: str) -> tuple[str, ...]:
    return PREFIXES if name == "char-lm" else SENTENCES


def clear(a: float, b: float) -> bool:
    """Two candidates' values that no float32 rounding within the tolerance can swap."""
    return abs(a - b) > 2 * (ATOL + RTOL * max(abs(a), abs(b)))


def clear_choices(name: str) -> list[str]:
    """Every choice of the reference inputs that rounding could flip: greedy's top two probabilities and each beam
    step's candidates (their order gives the nodes their ids). Empty for inputs fit to be compared exactly."""
    translator, near = toy(name), []
    for s, text in enumerate(texts_of(name)):
        for step in translator.steps(text, DecodeConfig(max_len=9)):
            if isinstance(step, DecodeStep) and not step.forced and not clear(step.topk[0][1], step.topk[1][1]):
                near.append(f"{s}/greedy/{step.index}: {step.topk[:2]}")
        for event in translator.beam_steps(text, DecodeConfig(max_len=9, beam=4)):
            if isinstance(event, BeamStep):
                scores = sorted(n.score for n in event.nodes if n.step.index == event.index)
                near += [f"{s}/beam/{event.index}: {a} {b}" for a, b in zip(scores, scores[1:]) if not clear(a, b)]
    return near


def exact_keys(arrays: dict[str, np.ndarray]) -> list[str]:
    """The choices: tokens, tree links, statuses, rankings and batched searches' ids (an empty id list reads as
    float64, so the names decide, not the dtypes)."""
    return [k for k in arrays if "/batch/" in k or k.endswith(("/token", "/node", "/status", "/ranking"))]


@pytest.mark.parametrize("name", MODELS)
def test_the_reference_inputs_hold_no_near_ties(name):
    """A tie-break is up to the CPU: inputs with one could not be compared token for token across machines."""
    assert clear_choices(name) == []


@pytest.mark.parametrize("name", MODELS)
def test_search_matches_the_stored_reference_on_any_cpu(name, reference):
    """The same steps, tree, tokens, statuses and ranking; every probability, attention weight and score within
    float32 rounding (greedy, the beam tree with every attention row, and batched greedy and beam)."""
    now = capture(name)
    expected = {k: v for k, v in reference.items() if k.startswith(f"{name}/")}
    assert sorted(now) == sorted(expected)  # the same steps, nodes and rows: the same tree
    exact = exact_keys(expected)
    assert any("/batch/" in k for k in exact) == (name != "char-lm") and any(k.endswith("/token") for k in exact)
    assert [k for k in exact if not np.array_equal(now[k], expected[k])] == []
    for key in sorted(set(expected) - set(exact)):
        np.testing.assert_allclose(now[key], expected[key], rtol=RTOL, atol=ATOL, err_msg=key)


@pytest.mark.parametrize("name", [m for m in MODELS if m != "char-lm"])
def test_batched_search_chooses_what_one_sentence_at_a_time_chooses(name):
    """In one process: a padded batch decodes each sentence to the same ids as that sentence alone, greedy and by
    beam, and greedy's ids are the step-by-step search's."""
    translator = toy(name)
    sources = [translator.prepare(t).src_ids for t in SENTENCES]
    batch = pad_batch(sources).long()
    alone = [pad_batch([ids]).long() for ids in sources]
    beam = DecodeConfig(max_len=9, beam=3)
    assert greedy_batch(translator.model, batch, 9) == [greedy_batch(translator.model, a, 9)[0] for a in alone]
    assert beam_batch(translator.model, batch, beam) == [beam_batch(translator.model, a, beam)[0] for a in alone]
    stepped = [[s.token_id for s in translator.steps(t, DecodeConfig(max_len=9)) if isinstance(s, DecodeStep)]
               for t in SENTENCES]
    assert [ids for ids in greedy_batch(translator.model, batch, 9)] == [[i for i in s if i != 3] for s in stepped]


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
        # logits of magnitude ~1, sums of 128 products: a few float32 ulps apart, whichever kernel sums them
        torch.testing.assert_close(rows, model.project(hidden), rtol=1e-5, atol=1e-5)
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
