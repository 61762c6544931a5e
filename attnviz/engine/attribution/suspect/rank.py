"""A corpus ranked by the suspect score (``suspect``'s components, ``suspect.rule``'s verdict), most suspect first,
every component kept. Torch-free; ``suspect.corpus`` decodes and scores the sentences.

With the model's calibration, "combined" is the calibrated score (the same for a sentence whatever the corpus);
without one it is the suspicion percentile of log-prob per token in this corpus alone, and the ranking says so.
Sentences the verdict flags come first, then the rest by their combined score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from attnviz.engine.attribution.suspect.components import LABELS, percentiles
from attnviz.engine.attribution.suspect.rule import FALLBACK, FALLBACK_LINE, Calibration, judge

UNCALIBRATED = ("not calibrated: combined = the suspicion percentile of log-prob per token in this corpus, the one "
                f"component trusted without a calibration; the verdict flags log-prob / token below {FALLBACK_LINE}. "
                "Run `attnviz calibrate` on the model to weigh every component by what it separates on the model's "
                "own held-out data")


def how(calibration: Calibration | None) -> str:
    """How the combined score and the verdict of a ranking are made, in one paragraph."""
    if calibration is None:
        return UNCALIBRATED + ". Flagged sentences first."
    if calibration.rule == "weighted":
        weights = ", ".join(f"{LABELS[n]} {w:.2f}" for n, w in calibration.weights().items())
        rule = (f"combined = the weighted mean of the voting components' standing among the model's good held-out "
                f"pairs (weights 2 AUROC - 1: {weights})")
    else:
        rule = (f"combined = {LABELS[calibration.rule]}'s standing among the model's good held-out pairs (it decides "
                "alone)")
    return (f"calibrated on {calibration.corpus} (rule AUROC {calibration.auroc:.3f}); {rule}; suspect above "
            f"{calibration.line:.2f}, which {calibration.flagged.get('own translation', math.nan):.0%} of the model's "
            "own translations there reach. Flagged sentences first")


@dataclass(frozen=True)
class SuspectRow:
    """One sentence of a ranked corpus."""

    line: int  # 1-based position in the corpus
    source: str
    output: str
    components: Mapping[str, float]
    combined: float = float("nan")
    reference: str | None = None
    verdict: str = ""
    flagged: bool = False


@dataclass(frozen=True)
class SuspectRanking:
    """A corpus ranked by the suspect score, flagged sentences first, every component kept."""

    rows: tuple[SuspectRow, ...]
    corpus: str  # what was ranked ("test split", a file's name)
    how: str = UNCALIBRATED
    notes: tuple[str, ...] = field(default=())
    calibration: Calibration | None = None
    where: str = "not calibrated"  # where the calibration comes from, or why there is none

    @staticmethod
    def of(rows: Sequence[SuspectRow], corpus: str, notes: tuple[str, ...] = (),
           calibration: Calibration | None = None, where: str = "not calibrated") -> SuspectRanking:
        if calibration is None:
            scores = percentiles(-np.array([r.components.get(FALLBACK, math.nan) for r in rows], dtype=np.float64))
        else:
            scores = np.array([calibration.score(r.components) for r in rows], dtype=np.float64)
        ranked = []
        for row, score in zip(rows, scores, strict=True):
            verdict = judge(row.components, calibration)
            ranked.append(SuspectRow(row.line, row.source, row.output, row.components, float(score), row.reference,
                                     verdict.text(), verdict.suspect))
        ranked.sort(key=lambda r: (not r.flagged, -r.combined if math.isfinite(r.combined) else math.inf, r.line))
        return SuspectRanking(tuple(ranked), corpus, how(calibration), notes, calibration, where)

    def records(self) -> list[dict]:
        """Plain rows (JSON, CSV): rank, line, combined, verdict, every component, source, output, reference."""
        return [{"rank": i, "line": r.line, "combined": r.combined, "verdict": r.verdict, **dict(r.components),
                 "source": r.source, "output": r.output, "reference": r.reference} for i, r in enumerate(self.rows, 1)]
