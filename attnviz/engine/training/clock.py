"""Training time in words: the estimate of the time a run has left, the h:mm:ss clock of elapsed time, and the
time left in words ("12 min 05 s left") that the CLI's progress lines and the app's both print: a clock beside an
ETA reads as the time of day it will be done.

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


def format_left(seconds: float) -> str:
    """The time a run has left in words, at the precision an estimate has: ``45 s left``, ``12 min 05 s left``,
    ``3 h 07 min left`` (a negative time reads ``0 s left``)."""
    whole = int(max(seconds, 0))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min left"
    if minutes:
        return f"{minutes} min {secs:02d} s left"
    return f"{secs} s left"
