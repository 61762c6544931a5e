"""Precision, recall and Alignment Error Rate of predicted links against sure and possible gold links.

With A the predicted links, S the sure and P the possible ones (P includes S), summed over the whole corpus
(Och & Ney 2003): precision = |A & P| / |A|, recall = |A & S| / |S|, AER = 1 - (|A & S| + |A & P|) / (|A| + |S|).
``Counts`` sums the four counts for a whole array of configurations at once (every layer x head) from bool link
matrices [..., n, m]; ``score_links`` scores sets of (source, target) links. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnviz.engine.errors import InputError

Links = set[tuple[int, int]]


@dataclass(frozen=True)
class Score:
    """One configuration's figures over the corpus, with the counts they come from."""

    precision: float
    recall: float
    aer: float
    predicted: int
    sure: int
    possible: int  # possible links, sure ones included

    def to_json(self) -> dict[str, Any]:
        return {"precision": round(self.precision, 4), "recall": round(self.recall, 4), "aer": round(self.aer, 4),
                "predicted": self.predicted}


def _figures(a_s, a_p, n_a, n_s):
    return a_p / np.maximum(n_a, 1), a_s / np.maximum(n_s, 1), 1.0 - (a_s + a_p) / np.maximum(n_a + n_s, 1)


class Counts:
    """|A & S|, |A & P|, |A|, |S|, |P| summed over sentences for any array of configurations."""

    def __init__(self) -> None:
        self.sums: np.ndarray | None = None  # [5, ...] the counts per configuration

    def add(self, links: np.ndarray, s: np.ndarray, p: np.ndarray) -> None:  # links [..., n, m]
        shape = links.shape[:-2]
        parts = np.stack([(links & s).sum((-1, -2)), (links & p).sum((-1, -2)), links.sum((-1, -2)),
                          np.broadcast_to(s.sum(), shape), np.broadcast_to(p.sum(), shape)])
        self.sums = parts if self.sums is None else self.sums + parts

    def _sums(self) -> np.ndarray:
        if self.sums is None:
            raise InputError("no sentence was aligned, so there is no alignment error rate to compute")
        return self.sums

    def aer(self) -> np.ndarray:
        return _figures(*self._sums()[:4])[2]

    def score(self, index: tuple[int, ...] = ()) -> Score:
        a_s, a_p, n_a, n_s, n_p = (np.asarray(x)[index] for x in self._sums())
        precision, recall, error = _figures(a_s, a_p, n_a, n_s)
        return Score(float(precision), float(recall), float(error), int(n_a), int(n_s), int(n_p))


def score_links(predicted: Sequence[Links], sure: Sequence[Links], possible: Sequence[Links]) -> Score:
    """Corpus figures of link sets; possible links are completed with the sure ones."""
    a_s = a_p = n_a = n_s = n_p = 0
    for a, s, p in zip(predicted, sure, possible, strict=True):
        p = p | s
        a_s, a_p, n_a, n_s, n_p = a_s + len(a & s), a_p + len(a & p), n_a + len(a), n_s + len(s), n_p + len(p)
    precision, recall, error = _figures(a_s, a_p, n_a, n_s)
    return Score(float(precision), float(recall), float(error), n_a, n_s, n_p)


def aer(predicted: Sequence[Links], sure: Sequence[Links], possible: Sequence[Links]) -> float:
    """Corpus AER = 1 - (|A & S| + |A & P|) / (|A| + |S|); possible links are completed with the sure ones."""
    return score_links(predicted, sure, possible).aer
