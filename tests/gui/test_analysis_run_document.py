"""The Analysis tab's run document (gui/analysis/run_document.py), Qt-free: fed the analysis job's events, it keeps
the results and tells its listeners each change; a failure or a reset leaves nothing stale."""

from __future__ import annotations

import numpy as np

from attnviz.engine.analysis.alignment import AlignmentReady
from attnviz.engine.analysis.run import AnalysisProgress, HeadStatsReady
from attnviz.session.analysis.run_document import (
    AlignmentArrived,
    AnalysisRunDocument,
    Progressed,
    RunFailed,
    RunReset,
    StatsArrived,
)

MAIN, OTHER = object(), object()  # stand-ins for HeadStats: the document only keeps them


def _recorded() -> tuple[AnalysisRunDocument, list]:
    run, seen = AnalysisRunDocument(), []
    run.subscribe(seen.append)
    return run, seen


def test_a_run_keeps_its_results_and_says_each_change():
    run, seen = _recorded()
    run.reset(running=True)
    run.feed(AnalysisProgress(3, 10, "attention"))
    run.feed(HeadStatsReady(MAIN))
    run.feed(HeadStatsReady(OTHER, role="compare"))
    aligned = AlignmentReady(("0-0",), "layer 1 head 1", aer_heads=np.array([[0.5, 0.2]]))
    run.feed(aligned)
    run.feed("a note the document does not know")
    assert seen == [RunReset(True), Progressed(3, 10, "attention"), StatsArrived(False), StatsArrived(True),
                    AlignmentArrived()]
    assert run.stats is MAIN and run.stats_b is OTHER and run.alignment is aligned and not run.failed


def test_a_failure_drops_the_comparison_and_a_reset_drops_everything():
    run, seen = _recorded()
    run.feed(HeadStatsReady(MAIN))
    run.feed(HeadStatsReady(OTHER, role="compare"))
    run.fail("Compare with: the checkpoints differ")
    assert run.failed and run.stats_b is None and run.stats is MAIN
    assert seen[-1] == RunFailed("Compare with: the checkpoints differ")
    run.reset()
    assert (run.stats, run.stats_b, run.alignment, run.failed) == (None, None, None, False)
    assert seen[-1] == RunReset(False)
