"""The verdict on one translation from its suspect-score components (``suspect``) and the model's calibration when it
has one: what each component reached on the model's own held-out data (``suspect.calibrate`` measures it,
``suspect.store`` keeps it with the model). Torch-free.

A calibration keeps, per component, its AUROC in the direction the literature gives (how well it told the model's
own translations and the human references from three kinds of wrong pairs), its line (the value past which only
``FALSE_ALARM`` of those good pairs lie), the good pairs' quantiles and a vote weight (``suspect.fit``). The score of
a translation is the weighted mean of its voting components' standing among the good pairs (0: less suspect than
every good pair, 1: more suspect than all); the verdict flags it past the score's own line, found the same way. When
the weighted score did not separate better than the best single component, the rule is that component alone.

Without a calibration the verdict reads log-prob per token alone against ``FALLBACK_LINE`` and says so. In both, an
output with ``UNK_LINE`` or more of its tokens ``<unk>`` or a sequence repeated ``REPEAT_LINE`` times
in a row is flagged with that reason, whatever the score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from attnviz.engine.attribution.suspect.components import DIRECTION, LABELS

FALSE_ALARM = 0.05  # the share of each kind of good held-out pair a line lets past (what it costs a correct output)
UNK_LINE = 0.3  # an output this much <unk> is flagged, calibrated or not
REPEAT_LINE = 3  # copies in a row of a 1- to 16-token sequence that flag an output ("a man a man a man")
FALLBACK = "mean_logprob"
FALLBACK_LINE = -3.5  # log-prob per token, for a model never calibrated (the bundled de-en model's line: -3.69)
GOOD_KINDS = ("own translation", "human reference")
BAD_KINDS = ("other sentence", "half replaced", "repetition")


def _number(value) -> float:
    """A stored figure (JSON null is NaN)."""
    return float("nan") if value is None else float(value)


def _plain(value: float) -> float | None:
    """A figure as JSON keeps it (NaN as null)."""
    return None if not math.isfinite(value) else float(value)


@dataclass(frozen=True)
class ComponentFit:
    """What one component reached on the calibration pairs."""

    auroc: float  # every wrong pair against every good one, in the documented direction (< 0.5: points the wrong way)
    by_kind: Mapping[str, float]  # the same against each kind of wrong pair
    line: float  # FALSE_ALARM of the good pairs lie past it (in the documented direction)
    weight: float  # its vote in the score (0: shown, not voted)
    note: str  # why it votes or not
    good: tuple[float, ...] = ()  # quantiles of the good pairs' values, ascending (empty: not measured)

    def standing(self, name: str, value: float) -> float:
        """The share of the good pairs less suspect than ``value`` (ties count half), 0..1; NaN when unknown."""
        if not self.good or not math.isfinite(value):
            return float("nan")
        q = np.asarray(self.good)
        below = (np.searchsorted(q, value, "left") + np.searchsorted(q, value, "right")) / (2 * q.size)
        return float(below if DIRECTION[name] > 0 else 1.0 - below)

    def past(self, name: str, value: float) -> bool:
        """Whether ``value`` lies past the component's line, on its suspect side."""
        return math.isfinite(value) and math.isfinite(self.line) and DIRECTION[name] * (value - self.line) > 0

    def to_dict(self) -> dict:
        return {"auroc": _plain(self.auroc), "by_kind": {k: _plain(v) for k, v in self.by_kind.items()},
                "line": _plain(self.line), "weight": self.weight, "note": self.note, "good": list(self.good)}

    @staticmethod
    def from_dict(data: Mapping) -> ComponentFit:
        return ComponentFit(_number(data["auroc"]), {str(k): _number(v) for k, v in dict(data["by_kind"]).items()},
                            _number(data["line"]), float(data["weight"]), str(data["note"]),
                            tuple(float(v) for v in data["good"]))


@dataclass(frozen=True)
class Calibration:
    """A model's suspect-score calibration: each component's fit, the rule and how it did on the pairs."""

    components: Mapping[str, ComponentFit]
    line: float  # the score past which a translation is suspect
    auroc: float  # the rule's score, every wrong pair against every good one
    by_kind: Mapping[str, float]  # the rule's AUROC against each kind of wrong pair
    flagged: Mapping[str, float]  # the share of each kind's pairs the verdict flags (good kinds: false alarms)
    pairs: Mapping[str, int]  # pairs scored per kind
    rule: str  # "weighted", or the one component that decides alone
    corpus: str  # what it was measured on ("val split, 1014 sentences")
    model: str = ""  # the model's name
    created: str = ""
    fingerprint: str = ""  # of the weights it was measured on (a calibration kept beside a model checks it)
    notes: tuple[str, ...] = field(default=())

    def weights(self) -> dict[str, float]:
        if self.rule != "weighted":
            return {self.rule: 1.0}
        return {name: fit.weight for name, fit in self.components.items() if fit.weight > 0}

    def score(self, found: Mapping[str, float]) -> float:
        """The weighted standing of a translation's voting components among the good pairs (NaN: none known)."""
        total = weight = 0.0
        for name, w in self.weights().items():
            standing = self.components[name].standing(name, found.get(name, math.nan))
            if math.isfinite(standing):
                total, weight = total + w * standing, weight + w
        return total / weight if weight > 0 else float("nan")

    def to_dict(self) -> dict:
        return {"version": 1, "components": {k: v.to_dict() for k, v in self.components.items()},
                "line": _plain(self.line), "auroc": _plain(self.auroc),
                "by_kind": {k: _plain(v) for k, v in self.by_kind.items()}, "flagged": dict(self.flagged),
                "pairs": dict(self.pairs), "rule": self.rule, "corpus": self.corpus, "model": self.model,
                "created": self.created, "fingerprint": self.fingerprint, "notes": list(self.notes)}

    @staticmethod
    def from_dict(data: Mapping) -> Calibration:
        """A stored calibration; ValueError saying what is wrong with one that is not."""
        try:
            if data.get("version") != 1:
                raise ValueError(f"version {data.get('version')!r}, not 1")
            fits = {str(k): ComponentFit.from_dict(v) for k, v in dict(data["components"]).items()}
            unknown = sorted(set(fits) - set(DIRECTION))
            rule = str(data["rule"])
            if unknown or (rule != "weighted" and rule not in fits):
                raise ValueError(f"unknown component {(unknown or [rule])[0]!r}")
            return Calibration(fits, _number(data["line"]), _number(data["auroc"]),
                               {str(k): _number(v) for k, v in dict(data["by_kind"]).items()},
                               {str(k): float(v) for k, v in dict(data["flagged"]).items()},
                               {str(k): int(v) for k, v in dict(data["pairs"]).items()}, rule, str(data["corpus"]),
                               str(data.get("model", "")), str(data.get("created", "")),
                               str(data.get("fingerprint", "")), tuple(str(n) for n in data.get("notes", ())))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"an entry is missing or of the wrong type ({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class Verdict:
    """Whether a translation looks like a hallucination, why, and by which rule."""

    suspect: bool
    reasons: tuple[str, ...]
    score: float  # the calibrated score (NaN without a calibration)
    calibrated: bool

    def text(self) -> str:
        if self.suspect:
            return "suspect: " + "; ".join(self.reasons)
        how = (f"calibrated score {self.score:.2f}" if self.calibrated and math.isfinite(self.score)
               else "not calibrated: log-prob / token alone")
        return f"no sign of a hallucination ({how})"


def explicit_flags(found: Mapping[str, float]) -> list[str]:
    """The reasons an output is flagged whatever its score: mostly ``<unk>``, or a sequence repeated in a row."""
    reasons = []
    unk, repeats = found.get("unk_share", math.nan), found.get("repeats", math.nan)
    if math.isfinite(unk) and unk >= UNK_LINE:
        reasons.append(f"{unk:.0%} of the output tokens are <unk>")
    if math.isfinite(repeats) and repeats >= REPEAT_LINE:
        reasons.append(f"a sequence repeated {int(repeats)} times in a row")
    return reasons


def judge(found: Mapping[str, float], calibration: Calibration | None) -> Verdict:
    """The verdict on one translation's components: the explicit flags, then the calibrated rule, or without a
    calibration log-prob per token against ``FALLBACK_LINE``."""
    reasons = explicit_flags(found)
    if calibration is None:
        value = found.get(FALLBACK, math.nan)
        if math.isfinite(value) and value < FALLBACK_LINE:
            reasons.append(f"{LABELS[FALLBACK]} {value:.2f} below {FALLBACK_LINE} (not calibrated)")
        return Verdict(bool(reasons), tuple(reasons), float("nan"), False)
    score = calibration.score(found)
    if math.isfinite(score) and score > calibration.line:
        past = [f"{LABELS[name]} {found[name]:.2f} {'below' if DIRECTION[name] < 0 else 'above'} "
                f"{calibration.components[name].line:.2f}" for name in calibration.weights()
                if calibration.components[name].past(name, found.get(name, math.nan))]
        reasons.append(f"calibrated score {score:.2f} above {calibration.line:.2f}"
                       + (f" ({', '.join(past)})" if past else ""))
    return Verdict(bool(reasons), tuple(reasons), score, True)


def describe(calibration: Calibration | None, where: str = "") -> list[str]:
    """What the verdict rests on, one line per component with the AUROC it reached on the model (the tooltips and
    ``attnviz calibrate`` say it the same way)."""
    flags = (f"Flagged whatever the score: {UNK_LINE:.0%} or more of the output <unk>, or a sequence said "
             f"{REPEAT_LINE} times in a row.")
    if calibration is None:
        return [f"Not calibrated ({where or 'no calibration kept with this model'}): the verdict reads "
                f"{LABELS[FALLBACK]} alone, suspect below {FALLBACK_LINE}; the other components are shown, not voted. "
                "Run `attnviz calibrate -m MODEL` to measure what each one separates on this model.", flags]
    decides = (f"{LABELS[calibration.rule]} decides alone" if calibration.rule != "weighted"
               else "the components vote, weighted by 2 AUROC - 1")
    lines = [f"Calibrated on {calibration.corpus} ({sum(calibration.pairs.values()):,} pairs; {where or 'kept'}): "
             f"{decides}; rule AUROC {calibration.auroc:.3f}, suspect above a score of {calibration.line:.2f}."]
    for name, fit in calibration.components.items():
        kinds = ", ".join(f"{kind} {value:.2f}" for kind, value in fit.by_kind.items() if math.isfinite(value))
        auroc = f"AUROC {fit.auroc:.3f} ({kinds})" if math.isfinite(fit.auroc) else "AUROC not measured"
        line = f"; line {fit.line:.3g}" if math.isfinite(fit.line) else ""
        lines.append(f"{LABELS[name]}: {auroc}: {_role(calibration, name)}{line}.")
    rates = ", ".join(f"{kind} {share:.1%}" for kind, share in calibration.flagged.items())
    return [*lines, f"Flagged there: {rates}.", *calibration.notes, flags]


def _role(calibration: Calibration, name: str) -> str:
    """What a component does in the verdict: decides alone, votes, or why it does not."""
    fit = calibration.components[name]
    if calibration.rule == name:
        return "decides alone"
    if calibration.rule != "weighted" and fit.weight > 0:
        return f"would vote with weight {fit.weight:.2f}, but {LABELS[calibration.rule]} alone separated better"
    return fit.note
