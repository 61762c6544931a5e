"""Typed measurements as checkpoints store them: one evaluation of a training run (``EvalRecord``) and one
evaluation report of a split (``SplitMetrics``).

Both read the JSON a checkpoint's header holds and write it back unchanged, so files written before these types
existed load as they are. Validation loss is ``loss`` everywhere (in files, in these types and in training events).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_NUMBER = (int, float)


def _number(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    return float(value) if isinstance(value, _NUMBER) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class EvalRecord:
    """One evaluation during training, as a run's history keeps it."""

    step: int
    epoch: int
    loss: float  # validation loss, nats per target token
    ppl: float
    accuracy: float
    bleu: float | None = None  # bleu_tok on the validation sample; None for a language model
    seconds: float = 0.0  # training time until this evaluation
    averaged_epochs: tuple[str, ...] = ()  # the epoch files averaged into this record's weights, if any
    kept: bool = True  # False when an average was measured but not kept (worse than the best)

    def to_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = {"step": self.step, "epoch": self.epoch, "loss": self.loss, "ppl": self.ppl,
                                  "accuracy": self.accuracy, "seconds": round(self.seconds, 1)}
        if self.bleu is not None:
            record["bleu_tok"] = self.bleu
        if self.averaged_epochs:
            record["averaged_epochs"] = list(self.averaged_epochs)
        if not self.kept:
            record["kept"] = False
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalRecord:
        loss = _number(data, "loss")
        return cls(step=int(data.get("step", 0)), epoch=int(data.get("epoch", 0)),
                   loss=math.nan if loss is None else loss, ppl=_number(data, "ppl") or math.nan,
                   accuracy=_number(data, "accuracy") or 0.0, bleu=_number(data, "bleu_tok"),
                   seconds=_number(data, "seconds") or 0.0,
                   averaged_epochs=tuple(data.get("averaged_epochs") or ()), kept=bool(data.get("kept", True)))


SPLIT_FIGURES = ("bleu_tok", "sacrebleu", "chrf", "ppl", "accuracy", "loss")


@dataclass(frozen=True)
class SplitMetrics:
    """What one measurement of a split found: the headline figures, typed, and every other stored entry."""

    loss: float | None = None
    ppl: float | None = None
    accuracy: float | None = None
    bleu_tok: float | None = None
    sacrebleu: float | None = None
    chrf: float | None = None
    stored: Mapping[str, Any] = field(default_factory=dict)  # every entry as stored (sentences, decode, signatures...)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SplitMetrics:
        return cls(**{key: _number(data, key) for key in SPLIT_FIGURES}, stored=dict(data))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.stored)

    def numbers(self) -> dict[str, float]:
        """Every numeric entry in stored order (flags count as 0 or 1), for tooltips and summaries."""
        return {k: v for k, v in self.stored.items() if isinstance(v, _NUMBER)}
