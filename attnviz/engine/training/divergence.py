"""Noticing a diverging run: a training loss that rises by orders of magnitude while staying finite.

The rule, applied after every optimizer step: the loss is smoothed with an exponential moving average (weight
``SMOOTHING`` on the history, started at the first step's loss); from step ``MIN_STEPS`` of the run (or of the
resumed part) on, the run is diverging when the smoothed loss is more than ``FACTOR`` times its lowest value so far
and more than twice the first step's loss. A healthy run never climbs above where it started, so noise, restarts of
a schedule and late plateaus do not trip it; a learning rate that is too high does, within a few dozen steps.
``training`` stops such a run with ``TrainFailed`` and keeps its last good checkpoint, as it does for a NaN loss.
"""

from __future__ import annotations

SMOOTHING = 0.9
FACTOR = 10.0
MIN_STEPS = 10


class DivergenceWatch:
    """Feed it every step's loss; ``update`` returns a message once the rule above says the run diverges."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.smoothed = 0.0
        self.lowest = float("inf")
        self.seen = 0

    def update(self, loss: float, step: int, lr: float) -> str | None:
        if self.first is None:
            self.first = self.smoothed = loss
        else:
            self.smoothed = SMOOTHING * self.smoothed + (1 - SMOOTHING) * loss
        self.seen += 1
        self.lowest = min(self.lowest, self.smoothed)
        if self.seen < MIN_STEPS or not (self.smoothed > FACTOR * self.lowest and self.smoothed > 2 * self.first):
            return None
        return (f"the training loss is diverging: its moving average rose to {self.smoothed:.3g} at step {step}, more "
                f"than {FACTOR:g} times its lowest value ({self.lowest:.3g}) and twice the first step's loss "
                f"({self.first:.3g}); training stopped. Lower the learning rate (now {lr:.3g}) or raise the warm-up, "
                "then start again or resume from the last good checkpoint.")
