"""Argument types for the command line: every option value is checked where argparse reads it.

A value out of range (``--beam 100000``), not a number, not finite, or an output path that is a folder or lies in
a folder that does not exist gives argparse's usage message and exit status 2 before any model is read, instead
of a traceback or an allocation that never ends.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

MAX_BEAM = 64  # wider beams give no better translations and need beam x batch decoder states
MAX_LEN = 1000


def int_range(low: int, high: int):
    """An argparse type: an integer from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low:,} to {high:,}, not {value:,}")
        return value

    return parse


def float_range(low: float, high: float):
    """An argparse type: a finite number from ``low`` to ``high``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(f"must be a number from {low:g} to {high:g}, not {text}")
        return value

    return parse


def output_file(text: str) -> str:
    """An argparse type: a file to write, not a folder, in a folder that exists."""
    path = Path(text)
    if not text or path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; give a file name such as {path / 'attention.npz'}")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"the folder {str(path.parent)!r} does not exist")
    return text


BEAM = int_range(1, MAX_BEAM)
MAX_LENGTH = int_range(1, MAX_LEN)
LENGTH_PENALTY = float_range(0.0, 10.0)
