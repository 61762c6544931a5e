"""Sampling's top-k and top-p cut-offs (``rules.sampling_cut``): what they keep, the same as transformers' warpers,
and a sampled decode that never leaves them."""

import math

import pytest
import torch

from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import ConfigError
from attnviz.engine.events import DecodeStep
from attnviz.engine.search.rules import sampling_cut

SOURCE = "q1 q2 q3"
PROBS = torch.tensor([0.05, 0.4, 0.1, 0.3, 0.15])  # order by probability: 1, 3, 4, 2, 0


def _kept(decode: DecodeConfig, scores: torch.Tensor | None = None) -> list[int]:
    cut = sampling_cut(PROBS.log() if scores is None else scores, decode)
    return sorted(int(i) for i in torch.nonzero(cut > float("-inf")).flatten())


def test_top_k_keeps_the_k_most_probable_and_ties_at_the_kth():
    assert _kept(DecodeConfig(temperature=1, sample_top_k=2)) == [1, 3]
    assert _kept(DecodeConfig(temperature=1, sample_top_k=9)) == [0, 1, 2, 3, 4]  # more than V: every token
    tied = torch.tensor([3.0, 1.0, 2.0, 2.0])
    assert _kept(DecodeConfig(temperature=1, sample_top_k=2), tied) == [0, 2, 3]


def test_top_p_keeps_the_token_that_crosses_the_mass_and_at_least_one():
    assert _kept(DecodeConfig(temperature=1, sample_top_p=0.5)) == [1, 3]  # 0.4 < 0.5, then 0.7 crosses it
    assert _kept(DecodeConfig(temperature=1, sample_top_p=0.4)) == [1]  # exactly reached by the first
    assert _kept(DecodeConfig(temperature=1, sample_top_p=1e-6)) == [1]
    assert _kept(DecodeConfig(temperature=1, sample_top_p=0.9)) == [1, 2, 3, 4]


def test_kept_scores_are_unchanged_and_both_cut_offs_compose():
    scores = PROBS.log()
    cut = sampling_cut(scores, DecodeConfig(temperature=1, sample_top_k=3, sample_top_p=0.5))
    assert torch.equal(cut[[1, 3]], scores[[1, 3]]) and bool((cut[[0, 2, 4]] == float("-inf")).all())
    assert torch.equal(sampling_cut(scores, DecodeConfig(temperature=1)), scores)  # both off: nothing cut


def test_the_cut_offs_are_transformers_warpers():
    warpers = pytest.importorskip("transformers.generation.logits_process")
    torch.manual_seed(0)
    scores = torch.randn(1, 300)
    for k, p in ((1, 1.0), (7, 1.0), (0, 0.3), (0, 0.95), (20, 0.6)):
        expected = scores
        if k:
            expected = warpers.TopKLogitsWarper(k)(None, expected)
        if p < 1:
            expected = warpers.TopPLogitsWarper(p)(None, expected)
        got = sampling_cut(scores[0], DecodeConfig(temperature=1, sample_top_k=k, sample_top_p=p))
        assert torch.equal(got, expected[0]), (k, p)


@pytest.mark.parametrize("field, value", [("sample_top_k", -1), ("sample_top_k", 2.5), ("sample_top_k", True),
                                          ("sample_top_p", 0.0), ("sample_top_p", 1.5), ("sample_top_p", math.nan)])
def test_bad_cut_offs_are_refused_with_what_is_allowed(field, value):
    with pytest.raises(ConfigError, match=field):
        DecodeConfig(temperature=1, **{field: value})


def test_a_sampled_decode_only_draws_inside_the_cut_off(trained_translator):
    tr = trained_translator
    decode = DecodeConfig(temperature=5.0, sample_top_k=1, max_len=8, topk=64)  # top-1 at any temperature: greedy
    greedy = tr.translate(SOURCE, DecodeConfig(max_len=8, topk=64)).tokens
    for seed in range(3):
        assert tr.translate(SOURCE, decode.replace(seed=seed)).tokens == greedy
    # at temperature 1 the probabilities a step shows are the ones it draws from
    nucleus = DecodeConfig(temperature=1.0, sample_top_p=0.5, max_len=8, topk=64)
    for seed in range(5):
        steps = [s for s in tr.steps(SOURCE, nucleus.replace(seed=seed)) if isinstance(s, DecodeStep)]
        for step in steps:
            ranked = [token for token, _ in step.topk]
            probs = [p for _, p in step.topk]
            mass_before = sum(probs[:ranked.index(step.token)]) if step.token in ranked else 1.0
            assert mass_before < 0.5 + 1e-6  # drawn from the fewest tokens holding half the mass
