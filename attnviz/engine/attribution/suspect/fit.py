"""Fitting a suspect-score calibration (``suspect.rule.Calibration``) to scored pairs: each component's AUROC, line
and vote weight, then the rule and its line. Torch-free (numpy); ``suspect.calibrate`` builds and scores the pairs.

The pairs are good (the model's own translation of a held-out sentence, and its human reference) or wrong (another
sentence's translation, the own translation with its second half replaced by another's, its first half repeated).
A component's AUROC is the chance that a random wrong pair is more suspect than a random good one, in the direction
the literature gives (ties count half): 1 separates perfectly, 0.5 is chance, below 0.5 it points the wrong way.
A component votes with weight 2 AUROC - 1 when its AUROC is ``MIN_AUROC`` or more; sink mass and the whole-output
log-prob never vote (the issue found sink mass pointing the wrong way; the sum grows with length), and the
``<unk>`` share and the repeats flag past their own lines instead. The weighted score must beat the best voting
component alone on the same pairs, else that component decides alone; if none votes, log-prob per token does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from attnviz.engine.attribution.suspect.components import COMPONENTS, DIRECTION, LABELS, percentiles
from attnviz.engine.attribution.suspect.rule import (
    BAD_KINDS,
    FALLBACK,
    FALSE_ALARM,
    GOOD_KINDS,
    Calibration,
    ComponentFit,
    judge,
)
from attnviz.engine.errors import InputError

MIN_AUROC = 0.6  # a component that separates less than this in its documented direction does not vote
QUANTILES = 101  # the good pairs' values kept per component (a standing to 1% of the good pairs)
MIN_PAIRS = 10  # pairs of each kind a calibration needs
NEVER_VOTED = {"sink_mass": "shown, never voted (parked attention is no reliable sign)",
               "seq_logprob": "shown, never voted (it grows with the length)",
               "unk_share": "flags an output past 30% on its own, never voted",
               "repeats": "flags 3 copies in a row on its own, never voted"}


def auroc(suspicion: Sequence[float] | np.ndarray, bad: Sequence[bool] | np.ndarray) -> float:
    """The chance that a random ``bad`` item has a higher ``suspicion`` than a random good one, ties counting half
    (the Mann-Whitney U over both counts); items with a NaN are left out; NaN when either class is empty."""
    s, b = np.asarray(suspicion, dtype=np.float64), np.asarray(bad, dtype=bool)
    keep = np.isfinite(s)
    s, b = s[keep], b[keep]
    n_bad, n_good = int(b.sum()), int((~b).sum())
    if n_bad == 0 or n_good == 0:
        return float("nan")
    ranks = percentiles(s) * (s.size - 1) if s.size > 1 else np.zeros(1)  # 0-based average ranks
    u = ranks[b].sum() - n_bad * (n_bad - 1) / 2
    return float(u / (n_bad * n_good))


def _line(values: np.ndarray, kinds: np.ndarray, direction: int) -> float:
    """The value past which at most FALSE_ALARM of each kind of good pair lie, on the suspect side (the most lenient
    of the good kinds' lines: the human references, the harder kind, are not flagged more than the own outputs)."""
    lines = []
    for kind in GOOD_KINDS:
        known = values[(kinds == kind) & np.isfinite(values)]
        if known.size:
            lines.append(direction * float(np.quantile(known, 1 - FALSE_ALARM if direction > 0 else FALSE_ALARM)))
    return direction * max(lines) if lines else float("nan")


def _vote(name: str, value: float) -> tuple[float, str]:
    if name in NEVER_VOTED:
        return 0.0, NEVER_VOTED[name]
    if not math.isfinite(value):
        return 0.0, "not defined for this model"
    if value < 0.5:
        return 0.0, f"points the wrong way on this model (AUROC {value:.2f}): shown, not voted"
    if value < MIN_AUROC:
        return 0.0, f"too weak to vote (AUROC {value:.2f} < {MIN_AUROC})"
    return 2 * value - 1, f"votes with weight {2 * value - 1:.2f} (2 AUROC - 1)"


def _component(name: str, values: np.ndarray, kinds: np.ndarray) -> ComponentFit:
    good, bad = np.isin(kinds, GOOD_KINDS), np.isin(kinds, BAD_KINDS)
    sign = DIRECTION[name]
    overall = auroc(sign * values[good | bad], bad[good | bad])
    by_kind = {kind: auroc(sign * values[good | (kinds == kind)], (kinds == kind)[good | (kinds == kind)])
               for kind in BAD_KINDS}
    weight, note = _vote(name, overall)
    known = values[good & np.isfinite(values)]
    quantiles = tuple(float(q) for q in np.quantile(known, np.linspace(0, 1, QUANTILES))) if known.size else ()
    return ComponentFit(overall, by_kind, _line(values, kinds, sign), weight, note, quantiles)


def _with_rule(fits: Mapping[str, ComponentFit], rule: str, rows: Sequence[Mapping[str, float]],
               kinds: np.ndarray, **about) -> Calibration:
    """The calibration deciding by ``rule``: its score's line, AUROC, AUROC per wrong kind and flag rates."""
    draft = Calibration(fits, math.nan, math.nan, {}, {}, {}, rule, **about)
    scores = np.array([draft.score(row) for row in rows])
    good = np.isin(kinds, GOOD_KINDS)
    line = _line(scores, kinds, 1)
    by_kind = {kind: auroc(scores[good | (kinds == kind)], (kinds == kind)[good | (kinds == kind)])
               for kind in BAD_KINDS}
    overall = auroc(scores, ~good)
    pairs = {kind: int((kinds == kind).sum()) for kind in (*GOOD_KINDS, *BAD_KINDS)}
    ruled = Calibration(fits, line, overall, by_kind, {}, pairs, rule, **about)
    flagged = {kind: float(np.mean([judge(row, ruled).suspect for row, k in zip(rows, kinds, strict=True)
                                    if k == kind])) for kind in pairs if pairs[kind]}
    return Calibration(fits, line, overall, by_kind, flagged, pairs, rule, **about)


def fit(rows: Sequence[tuple[str, Mapping[str, float]]], corpus: str, model: str = "",
        fingerprint: str = "") -> Calibration:
    """The calibration of scored pairs ``(kind, components)``, kinds from ``GOOD_KINDS`` and ``BAD_KINDS``;
    InputError when a kind has fewer than ``MIN_PAIRS`` pairs."""
    kinds = np.array([kind for kind, _ in rows])
    short = [f"{kind} ({int((kinds == kind).sum())})" for kind in (*GOOD_KINDS, *BAD_KINDS)
             if (kinds == kind).sum() < MIN_PAIRS]
    if short:
        raise InputError(f"Calibrating the suspect score needs at least {MIN_PAIRS} pairs of each kind; too few: "
                         f"{', '.join(short)}. Use more held-out sentences (a larger --limit, or a longer file).")
    found = [row for _, row in rows]
    fits = {name: _component(name, np.array([row.get(name, math.nan) for row in found]), kinds)
            for name in COMPONENTS}
    about = {"corpus": corpus, "model": model, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
             "fingerprint": fingerprint}
    voting = sorted((n for n, f in fits.items() if f.weight > 0), key=lambda n: -fits[n].auroc)
    if not voting:
        alone = _with_rule(fits, FALLBACK, found, kinds, **about)
        note = f"no component reached AUROC {MIN_AUROC}: the verdict reads {LABELS[FALLBACK]} alone"
        return replace(alone, notes=(note,))
    weighted = _with_rule(fits, "weighted", found, kinds, **about)
    best = _with_rule(fits, voting[0], found, kinds, **about)
    if len(voting) > 1 and weighted.auroc > best.auroc:
        return weighted
    if len(voting) == 1:
        return best
    note = (f"The weighted score (AUROC {weighted.auroc:.3f}) did not beat {LABELS[voting[0]]} alone "
            f"({best.auroc:.3f}) on these pairs: the verdict reads {LABELS[voting[0]]} alone.")
    return replace(best, notes=(note,))
