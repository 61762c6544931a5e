"""How noisy a change of corpus BLEU is: a paired bootstrap over sentences (Koehn 2004), seeded so that the same
corpus and outputs always give the same interval.

BLEU is a corpus figure, so it is resampled through its sufficient statistics: per sentence the hypothesis and
reference lengths and, for n = 1..4, the clipped n-gram matches and the hypothesis n-grams (``sentence_stats``, on
token lists as ``metrics.bleu_tok`` scores them). ``bleu_of_stats`` turns summed statistics into BLEU exactly as
sacreBLEU's corpus BLEU does (exponential smoothing of a zero precision, brevity penalty), vectorised over many
resamples. ``Resamples`` draws B resamples of the N sentences once (as counts [B, N]), and ``delta_interval`` gives
the central interval of baseline - other over the same resamples: paired, so the sentences' own difficulty cancels
out and only the change is measured. An interval that contains 0 says the corpus is too small to tell.

Torch-free: numpy only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ORDER = 4  # BLEU's n-gram orders
SAMPLES = 1000  # resamples: the interval's ends move by well under 0.1 BLEU between seeds at this size
SEED = 0
LEVEL = 0.95


def sentence_stats(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> np.ndarray:
    """[N, 2 + 2 * ORDER]: hypothesis length, reference length, matches for n = 1..4, hypothesis n-grams n = 1..4."""
    rows = []
    for hyp, ref in zip(hypotheses, references, strict=True):
        row = [len(hyp), len(ref)]
        matches, totals = [], []
        for n in range(1, ORDER + 1):
            h = Counter(tuple(hyp[i:i + n]) for i in range(len(hyp) - n + 1))
            r = Counter(tuple(ref[i:i + n]) for i in range(len(ref) - n + 1))
            matches.append(sum(min(count, r[gram]) for gram, count in h.items()))
            totals.append(max(len(hyp) - n + 1, 0))
        rows.append(row + matches + totals)
    return np.asarray(rows, dtype=np.float64).reshape(-1, 2 + 2 * ORDER)


def bleu_of_stats(stats: np.ndarray) -> np.ndarray:
    """BLEU (0..100) of summed statistics [..., 2 + 2 * ORDER], as sacreBLEU's corpus BLEU computes it."""
    sys_len, ref_len = stats[..., 0], stats[..., 1]
    correct, total = stats[..., 2:2 + ORDER], stats[..., 2 + ORDER:]
    # a zero precision n counts as 1 / (2^k total), k the zero precisions up to n (mteval's "exp" smoothing)
    halvings = np.cumsum(correct == 0, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(correct > 0, correct / total, 1.0 / (2.0 ** halvings * total))
        precision = np.where(total > 0, precision, 0.0)  # no n-grams of this order: BLEU is 0
        log_mean = np.log(precision).mean(axis=-1)
        brevity = np.where(sys_len >= ref_len, 1.0, np.exp(1 - ref_len / np.maximum(sys_len, 1e-300)))
    brevity = np.where(sys_len > 0, brevity, 0.0)
    score = 100.0 * brevity * np.exp(log_mean)
    return np.where(correct.sum(axis=-1) > 0, score, 0.0)


@dataclass(frozen=True)
class Resamples:
    """B resamples of N sentences, drawn once with a seed: ``weights`` [B, N] counts how often each was drawn."""

    weights: np.ndarray
    seed: int = SEED
    level: float = LEVEL

    @classmethod
    def draw(cls, sentences: int, samples: int = SAMPLES, seed: int = SEED, level: float = LEVEL) -> Resamples:
        rng = np.random.default_rng(seed)
        drawn = rng.integers(0, sentences, size=(samples, sentences))
        weights = np.zeros((samples, sentences))
        np.add.at(weights, (np.arange(samples)[:, None], drawn), 1.0)
        return cls(weights, seed, level)

    def describe(self) -> dict:
        """What a saved result says about its intervals."""
        return {"method": "paired bootstrap over sentences", "samples": int(self.weights.shape[0]),
                "seed": self.seed, "level": self.level}

    def delta_interval(self, baseline: np.ndarray, other: np.ndarray) -> tuple[float, float]:
        """The central ``level`` interval of BLEU(baseline) - BLEU(other) over the resamples; both [N, stats]."""
        deltas = bleu_of_stats(self.weights @ baseline) - bleu_of_stats(self.weights @ other)  # [B]
        tail = (1 - self.level) / 2
        low, high = np.quantile(deltas, [tail, 1 - tail])
        return float(low), float(high)
