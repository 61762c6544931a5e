"""Training time in words: the estimate of the time a run has left, and the h:mm:ss clock that the CLI's progress
line and the Train tab both print (elapsed evaluation time and the ETA alike).

Qt-free and torch-free: the loop estimates, every consumer formats with the same clock.
"""

from __future__ import annotations


def remaining_seconds(busy_s: float, steps_timed: int, steps_left: int) -> float:
    """The time ``steps_left`` steps will take at the mean pace of the ``steps_timed`` steps that took ``busy_s``."""
    return busy_s / max(steps_timed, 1) * steps_left


def format_clock(seconds: float) -> str:
    """``seconds`` as h:mm:ss, hours unbounded (a negative time reads 0:00:00)."""
    hours, rest = divmod(int(max(seconds, 0)), 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
