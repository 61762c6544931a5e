"""Head importance on a budget: a seeded random sample of heads measures exactly that many (and says so in the
result and its file), and the gradient estimate (Michel et al. 2019: expected |dL/d gate|) equals a finite
difference of the teacher-forced loss and ranks a head switched off in the weights (its out_proj slice zeroed)
least important, with its cost said."""

import copy

import numpy as np
import pytest
import torch

from attnviz.engine.analysis.gradient_importance import GradientImportance, _forced_pair, gradient_importance_steps
from attnviz.engine.analysis.importance import ImportanceReady, importance_steps
from attnviz.engine.errors import InputError
from attnviz.engine.heads import HeadRef
from attnviz.engine.models.probes import HeadScale, edit

PAIRS = [("q1 q2 q3", "w3 w2 w1"), ("q4 q5 q6 q7", "w7 w6 w5 w4"), ("q8 q9", "w9 w8")]


def _result(events):
    return [e for e in events if isinstance(e, ImportanceReady | GradientImportance)][-1]


def test_a_seeded_sample_measures_exactly_that_many_heads_and_says_so(trained_translator):
    result = _result(importance_steps(trained_translator, PAIRS, sample=5, seed=3))
    total = sum(layers * heads for layers, heads in result.layout.values())
    assert len(result.heads) == 5 and result.sample == {"measured": 5, "of": total, "seed": 3}
    assert sum(int((~np.isnan(result.matrix(kind))).sum()) for kind in result.layout) == 5
    again = _result(importance_steps(trained_translator, PAIRS, sample=5, seed=3))
    other = _result(importance_steps(trained_translator, PAIRS, sample=5, seed=4))
    heads = lambda r: {(h.kind, h.layer, h.head) for h in r.heads}  # noqa: E731
    assert heads(again) == heads(result) and heads(other) != heads(result)
    assert ImportanceReady.from_json(result.to_json()).sample == result.sample
    assert _result(importance_steps(trained_translator, PAIRS, sample=total + 5)).sample == {}  # all: no sample
    with pytest.raises(InputError, match=f"--sample is 0, but it must be a number of heads from 1 to {total}"):
        list(importance_steps(trained_translator, PAIRS, sample=0))


def _loss(translator, src, ref, point, gate) -> torch.Tensor:
    model = translator.model
    src_ids, tgt, lead = _forced_pair(translator, src, ref)
    with edit(model, {point: HeadScale(gate)}):
        out = model.decode(torch.tensor([tgt[:-1]]), model.encode(torch.tensor([src_ids])))
        logits = model.project(out.hidden)[0, lead:]
        return torch.nn.functional.cross_entropy(logits, torch.tensor(tgt[lead + 1:]))


def test_the_gradient_estimate_is_the_losss_derivative_and_ranks_a_dead_head_last(trained_translator):
    translator = copy.deepcopy(trained_translator)
    translator.model.double()  # a finite difference in float32 is good to a few percent only
    point = "dec.1.cross.weights"
    dh = translator.config.d_model // translator.config.heads
    with torch.no_grad():
        translator.model.decoder[1].cross_attn.out_proj.weight[:, 2 * dh:3 * dh] = 0  # head 3 of cross layer 2: mute
    events = list(gradient_importance_steps(translator, PAIRS))
    assert [e.done for e in events[:-1]] == [1, 2, 3] and events[0].unit == "sentences"
    result = events[-1]
    assert isinstance(result, GradientImportance) and result.passes == 3 and "3 forward + backward" in result.cost()
    least, score = result.ranking()[0]
    assert least == HeadRef("cross", 1, 2) and score == 0.0 and result.raw["cross"][1, 2] == 0.0
    assert (result.raw["cross"] > 0).sum() == result.raw["cross"].size - 1
    assert np.allclose(np.linalg.norm(result.scores["encoder"], axis=1), 1.0)
    eps, direct, differences = 1e-2, 0.0, 0.0  # the raw score: the mean over sentences of |dL/dg|
    for src, ref in PAIRS:
        gate = torch.ones(translator.config.heads, dtype=torch.float64, requires_grad=True)
        with torch.enable_grad():
            direct += abs(float(torch.autograd.grad(_loss(translator, src, ref, point, gate), [gate])[0][0]))
        up, down = (torch.ones(translator.config.heads, dtype=torch.float64) for _ in range(2))
        up[0], down[0] = 1 + eps, 1 - eps
        with torch.no_grad():
            change = _loss(translator, src, ref, point, up) - _loss(translator, src, ref, point, down)
            differences += abs(float(change))
    assert result.raw["cross"][1, 0] == pytest.approx(direct / len(PAIRS), rel=1e-5)
    # and by central differences, as far as the loss's float32 rounding and its ReLU kinks let them tell
    assert result.raw["cross"][1, 0] == pytest.approx(differences / (2 * eps) / len(PAIRS), rel=5e-2)
