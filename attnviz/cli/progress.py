"""How the command line shows long work on stderr: a text bar, and the analysis generators consumed behind one
progress line (rewritten in place on a terminal, a line per tenth of the work in a log).

Results go to stdout; only progress goes here, so a command's output can be piped while it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

from attnviz.engine.training.clock import format_left

if TYPE_CHECKING:  # the engine's analysis (torch) is imported when a command runs, not when the parser is built
    from attnviz.engine.analysis.importance import ImportanceProgress
    from attnviz.engine.analysis.run import AnalysisProgress
    from attnviz.engine.attribution.base import AttributionProgress

Ready = TypeVar("Ready")


def bar(fraction: float, width: int = 24) -> str:
    """``fraction`` (0..1) of ``width`` as ``####....``."""
    done = int(fraction * width)
    return "#" * done + "." * (width - done)


class ProgressLine:
    """One progress line on stderr: rewritten in place on a terminal, where ``end`` closes it before other output;
    a new line each time in a log."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.open = False  # a line is on the terminal without its newline

    def write(self, line: str) -> None:
        print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", file=sys.stderr, flush=True)
        self.open = self.tty

    def clear(self) -> None:
        """Erase an open line on a terminal (a progress line the output should not follow)."""
        if self.open:
            print("\r\x1b[K", end="", file=sys.stderr, flush=True)
            self.open = False

    def end(self) -> None:
        """Close an open line on a terminal, so that the next message starts on a line of its own."""
        if self.open:
            print(file=sys.stderr, flush=True)
            self.open = False

    def show(self, phase: str, done: int, total: int, unit: str) -> None:
        """``phase: done/total unit``; in a log only at each tenth of the work and at its end."""
        step = max(1, total // 10)
        if self.tty or done == total or done // step != (done - 1) // step:
            self.write(f"{phase}: {done}/{total} {unit}")


def run_analysis(steps: Iterable[AnalysisProgress | ImportanceProgress | AttributionProgress | Ready]) -> Ready:
    """Consume an analysis generator, showing its progress; return its result (the one event that is not
    progress)."""
    from attnviz.engine.analysis.importance import ImportanceProgress
    from attnviz.engine.analysis.run import AnalysisProgress
    from attnviz.engine.attribution.base import AttributionProgress

    progress, result = ProgressLine(), None
    for event in steps:
        match event:
            case AnalysisProgress(done=done, total=total, phase=phase):
                progress.show(phase, done, total, "sentences")
            case AttributionProgress(done=done, total=total, phase=phase, unit=unit):
                progress.show(phase, done, total, unit)
            case ImportanceProgress(done=done, total=total, phase=phase, unit=unit, eta_s=eta):
                progress.show(phase, done, total, unit + (f", {format_left(eta)}" if eta is not None else ""))
            case _:
                result = event
    progress.end()
    if result is None:
        raise RuntimeError("the analysis ended without a result")  # a generator that was not stopped always has one
    return result
