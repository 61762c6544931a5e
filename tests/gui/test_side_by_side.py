"""The tabs' jobs on one model run side by side, with no lock: while the Analysis tab's suspect ranking is in the
middle of a pass (its ALTI+ capture open on the model, held there by the test), a Translate tab decode finishes and
an attribution computed in the Translate tab gives the values it gives alone, and the ranking then gives its own;
the Analysis tab's views come out the same while another thread holds heads off on the model.

Before the probe points, hooks one job installed were seen by another ("too many values to unpack"), and a lock
made every job wait for the one using the model: each of these tests would then time out waiting."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest

from attnviz.engine.attribution import base
from attnviz.engine.attribution.base import Attribution, attribution_steps
from attnviz.engine.attribution.mixing import capture as mixing_capture
from attnviz.engine.attribution.suspect import batch as suspect_batch
from attnviz.engine.attribution.suspect.components import COMPONENTS
from attnviz.engine.attribution.suspect.corpus import suspect_steps
from attnviz.engine.attribution.suspect.rank import SuspectRanking
from attnviz.engine.heads import parse_heads
from attnviz.engine.search.head_mask import heads_off
from tests.gui.conftest import translate
from tests.gui.test_quantities import ready

SENTENCE = "q1 q2 q3 q1"
HOLD_S = 30  # the longest the ranking holds its pass open: a regression fails the test, never hangs it


class HeldRanking:
    """The suspect ranking's scoring, stopped in the middle of its first ALTI+ pass: the capture is open on the
    model, in the ranking's thread, until ``release`` is set (or ``HOLD_S`` passes)."""

    def __init__(self, monkeypatch):
        self.armed, self.held, self.release = threading.Event(), threading.Event(), threading.Event()
        self.span: list[float] = []  # when the pass was held, when it went on
        self._mine = threading.local()
        real_capture, real_components = mixing_capture.probe_capture, suspect_batch.batch_components

        @contextmanager
        def capture(model, names):
            with real_capture(model, names) as seen:
                if getattr(self._mine, "scoring", False) and not self.held.is_set():
                    self.span.append(time.monotonic())
                    self.held.set()
                    self.release.wait(HOLD_S)
                    self.span.append(time.monotonic())
                yield seen

        def components(translator, examples, with_alti, *more):
            self._mine.scoring = self.armed.is_set()  # this thread is the ranking's (not the test's own run)
            yield from real_components(translator, examples, with_alti, *more)

        monkeypatch.setattr(mixing_capture, "probe_capture", capture)
        monkeypatch.setattr(suspect_batch, "batch_components", components)

    def start(self, qtbot, window, corpus) -> None:
        """Rank ``corpus`` in ``window``'s Analysis tab and wait until its pass is held open."""
        tab = window.analysis_tab
        tab.pages.setCurrentWidget(tab.suspect)
        tab.set_files(*corpus)
        self.armed.set()
        tab.suspect.compute()
        assert self.held.wait(30), "the ranking never reached its ALTI+ pass"

    def overlapped(self, start: float, end: float) -> bool:
        """Whether [start, end] lies inside the time the ranking's pass was held open."""
        return self.span[0] < start and (len(self.span) == 1 or end < self.span[1])


@pytest.fixture()
def held(monkeypatch):
    ranking = HeldRanking(monkeypatch)
    yield ranking
    ranking.release.set()  # a failed test lets the ranking go on and end


def _idle(qtbot, window):
    tab, analysis = window.translate_tab, window.analysis_tab
    workers = (analysis.view_worker, tab.quantity.worker, tab.quantity.lens.worker, tab.quantity.suspect.worker)
    qtbot.waitUntil(lambda: not any(w.is_running() for w in workers), timeout=20000)


def _ranking_alone(translator, corpus):
    sources = open(corpus[0], encoding="utf-8").read().split("\n")[:5]
    return [e for e in suspect_steps(translator, sources) if isinstance(e, SuspectRanking)][0]


def _same_ranking(records, expected: SuspectRanking) -> None:
    for row, want in zip(records, expected.records(), strict=True):
        assert row["line"] == want["line"] and row["output"] == want["output"]
        for name in COMPONENTS:
            assert row[name] == pytest.approx(want[name], rel=1e-9, abs=1e-12, nan_ok=True)


def test_an_attribution_during_a_suspect_ranking_gives_its_values_alone(qtbot, loaded, suspect_corpus, held,
                                                                         monkeypatch):
    tab = translate(qtbot, loaded, SENTENCE)
    _idle(qtbot, loaded)
    t = tab.document.translation(-1)
    alone = [e for e in attribution_steps(loaded.translator, "alti-plus", t.src_tokens, t.tokens)
             if isinstance(e, Attribution)][0]
    ranking_alone = _ranking_alone(loaded.translator, suspect_corpus)
    spans, real_steps = [], base.attribution_steps

    def timed_steps(*args, **kwargs):
        start = time.monotonic()
        yield from real_steps(*args, **kwargs)
        spans.append((start, time.monotonic()))

    monkeypatch.setattr(base, "attribution_steps", timed_steps)
    held.start(qtbot, loaded, suspect_corpus)
    ready(qtbot, loaded, "alti-plus")  # computed while the ranking's capture is open on the same model
    panel = loaded.analysis_tab.suspect
    assert panel.is_running() and len(spans) == 1 and held.overlapped(*spans[0])
    shown = tab.quantity.result.maps["attribution"]  # [L', 1, T, S + T]
    np.testing.assert_array_equal(shown, np.concatenate([alone.source, alone.prefix], axis=-1)[:, None])
    held.release.set()
    qtbot.waitUntil(lambda: not panel.is_running() and panel.ranking is not None, timeout=60000)
    _same_ranking(panel.model.records, ranking_alone)  # and the ranking saw none of the attribution's pass


def test_a_decode_finishes_while_a_suspect_ranking_is_in_the_middle_of_a_pass(qtbot, loaded, suspect_corpus,
                                                                               held):
    alone = loaded.translator.translate("q4 q5 q6")
    held.start(qtbot, loaded, suspect_corpus)
    started = time.monotonic()
    tab = translate(qtbot, loaded, "q4 q5 q6")  # waits 20 s at most: it used to wait for the ranking's step
    panel = loaded.analysis_tab.suspect
    assert panel.is_running() and held.overlapped(started, time.monotonic())
    t = tab.document.translation(-1)
    assert t.tokens == alone.tokens and t.probabilities == alone.probabilities
    held.release.set()
    qtbot.waitUntil(lambda: not panel.is_running() and panel.ranking is not None, timeout=60000)
    assert len(panel.model.records) == 5


def test_the_analysis_tabs_views_are_the_same_while_another_thread_holds_heads_off(qtbot, loaded, monkeypatch):
    """The Analysis tab's views (norm-weighted attention reads the model's value vectors) are computed while a job
    in another thread is inside a heads-off block on the model, and give what they give alone."""
    from attnviz.engine.analysis import contributions

    tab = translate(qtbot, loaded, SENTENCE)
    _idle(qtbot, loaded)
    t = tab.current_translation()
    analysis, model, real = loaded.analysis_tab, loaded.translator.model, contributions.sentence_views
    alone = real(loaded.translator, t.src_tokens, t.decoder_inputs)
    computed: list[dict] = []  # what the view job computes, read where it computes it (its signal comes later)
    monkeypatch.setattr(contributions, "sentence_views", lambda *args: computed.append(real(*args)) or computed[-1])
    inside, leave = threading.Event(), threading.Event()

    def other_job():
        with heads_off(model, parse_heads("cross:1.*,cross:2.*", loaded.translator.kind.layout(model.cfg))):
            inside.set()
            leave.wait(HOLD_S)

    holder = threading.Thread(target=other_job, daemon=True)
    holder.start()
    try:
        assert inside.wait(10)
        analysis.set_translation(t)
        qtbot.waitUntil(lambda: len(computed) == 1, timeout=20000)
        assert holder.is_alive()  # the views were computed while the heads were off in the other thread
    finally:
        leave.set()
        holder.join(10)
    qtbot.waitUntil(lambda: analysis.sentence_views.views.keys() == alone.keys(), timeout=20000)  # and shown
    assert computed[0].keys() == alone.keys()
    for view, kinds in alone.items():
        for kind, maps in kinds.items():
            np.testing.assert_array_equal(computed[0][view][kind], maps, err_msg=f"{view}: {kind}")
