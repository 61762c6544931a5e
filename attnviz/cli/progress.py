"""How the command line shows long work on stderr: a text bar, and the analysis generators consumed behind one
progress line (rewritten in place on a terminal, a line per tenth of the work in a log).

Results go to stdout; only progress goes here, so a command's output can be piped while it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # the engine's analysis (torch) is imported when a command runs, not when the parser is built
    from attnviz.engine.analysis.importance import ImportanceProgress
    from attnviz.engine.analysis.run import AnalysisProgress

Ready = TypeVar("Ready")


def bar(fraction: float, width: int = 24) -> str:
    """``fraction`` (0..1) of ``width`` as ``####....``."""
    done = int(fraction * width)
    return "#" * done + "." * (width - done)


class ProgressLine:
    """One progress line on stderr, rewritten in place on a terminal."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = ""

    def show(self, phase: str, done: int, total: int, unit: str) -> None:
        step = max(1, total // 10)
        if not self.tty and done != total and done // step == (done - 1) // step:
            return
        line = f"{phase}: {done}/{total} {unit}"
        print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", file=sys.stderr, flush=True)
        self.last = line

    def close(self) -> None:
        if self.tty and self.last:
            print(file=sys.stderr)


def run_analysis(steps: Iterable[AnalysisProgress | ImportanceProgress | Ready]) -> Ready:
    """Consume an analysis generator, showing its progress; return its result (the one event that is not
    progress)."""
    from attnviz.engine.analysis.importance import ImportanceProgress
    from attnviz.engine.analysis.run import AnalysisProgress

    progress, result = ProgressLine(), None
    for event in steps:
        match event:
            case AnalysisProgress(done=done, total=total, phase=phase):
                progress.show(phase, done, total, "sentences")
            case ImportanceProgress(done=done, total=total, phase=phase, unit=unit):
                progress.show(phase, done, total, unit)
            case _:
                result = event
    progress.close()
    if result is None:
        raise RuntimeError("the analysis ended without a result")  # a generator that was not stopped always has one
    return result
