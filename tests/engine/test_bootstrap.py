"""The bootstrap interval of a BLEU change: BLEU from per-sentence statistics is exactly bleu_tok, the resamples are
seeded, and the interval is wide on a small corpus with a few changed sentences and clear on a large consistent
change."""

import random

import numpy as np
import pytest

from attnviz.engine.analysis.bootstrap import Resamples, bleu_of_stats, sentence_stats
from attnviz.engine.metrics import bleu_tok

WORDS = "a b c d e f g h".split()


def corpus(rng: random.Random, n: int, noise: float) -> tuple[list[list[str]], list[list[str]]]:
    refs = [[rng.choice(WORDS) for _ in range(rng.randint(1, 9))] for _ in range(n)]
    hyps = [[w if rng.random() > noise else rng.choice(WORDS) for w in r][: rng.randint(0, len(r) + 1)]
            for r in refs]
    return hyps, refs


@pytest.mark.parametrize("seed", range(12))
def test_bleu_from_summed_sentence_statistics_is_bleu_tok(seed):
    rng = random.Random(seed)
    hyps, refs = corpus(rng, rng.choice([1, 3, 20, 60]), rng.choice([0.0, 0.3, 0.9]))
    assert float(bleu_of_stats(sentence_stats(hyps, refs).sum(0))) == pytest.approx(bleu_tok(hyps, refs)[0],
                                                                                     abs=1e-9)


def test_no_match_and_an_empty_output_score_zero():
    assert bleu_of_stats(sentence_stats([["x"]], [["a", "b"]]).sum(0)) == 0.0
    assert bleu_of_stats(sentence_stats([[]], [["a", "b"]]).sum(0)) == 0.0 == bleu_tok([[]], [["a", "b"]])[0]


def test_resamples_are_seeded_and_draw_every_sentence_count_once_per_sample():
    a, b = Resamples.draw(20, samples=50, seed=3), Resamples.draw(20, samples=50, seed=3)
    assert np.array_equal(a.weights, b.weights) and not np.array_equal(a.weights, Resamples.draw(20, 50, 4).weights)
    assert a.weights.shape == (50, 20) and (a.weights.sum(1) == 20).all()
    assert a.describe() == {"method": "paired bootstrap over sentences", "samples": 50, "seed": 3, "level": 0.95}


def test_a_few_changed_sentences_of_twenty_are_noise_and_a_consistent_change_is_not():
    rng = random.Random(0)
    hyps, refs = corpus(rng, 400, 0.2)
    base = sentence_stats(hyps, refs)
    broken = [h[:1] if i < 3 else h for i, h in enumerate(hyps)]  # three sentences of twenty lose their words
    small = Resamples.draw(20)
    low, high = small.delta_interval(base[:20], sentence_stats(broken[:20], refs[:20]))
    delta = float(bleu_of_stats(base[:20].sum(0)) - bleu_of_stats(sentence_stats(broken[:20], refs[:20]).sum(0)))
    assert delta > 2 and low < 0.5 < high and high - low > 5  # a loss of several BLEU, yet the interval is wide
    assert small.delta_interval(base[:20], sentence_stats(broken[:20], refs[:20])) == (low, high)  # exact again
    everywhere = sentence_stats([h[: max(1, len(h) - 2)] for h in hyps], refs)
    low, high = Resamples.draw(400).delta_interval(base, everywhere)
    assert 0 < low < high  # every sentence shortened: the loss is clear
    assert Resamples.draw(400).delta_interval(base, base) == (0.0, 0.0)
