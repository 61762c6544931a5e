"""Analyses of one model in several threads at once (what the app's tabs do, with no lock since the probe points):
ALTI+ (captures), value zeroing (edits of the values), the logit lens (captures) and a translation with heads off
(head gates) run side by side on the same network, and each gives what it gives alone."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from attnviz.engine.attribution.base import Attribution, attribution_steps
from attnviz.engine.attribution.logit_lens import LogitLens, logit_lens_steps
from attnviz.engine.config import DecodeConfig
from attnviz.engine.heads import parse_heads
from tests.helpers import make_toy_translator, train_toy

SRC = tuple("q1 q2 q3 q4 q5".split())
OUT = tuple("w5 w4 w3 w2 w1".split())
TEXT = " ".join(SRC)


@pytest.fixture(scope="module")
def tr():
    translator = make_toy_translator(seed=4)
    train_toy(translator, steps=150)
    return translator


def _last(events, kind):
    found = [e for e in events if isinstance(e, kind)]
    assert len(found) == 1
    return found[0]


def _analyses(tr):
    """name -> a function of nothing giving the analysis' arrays (what is compared between runs)."""
    off = DecodeConfig(heads_off=parse_heads("cross:2.*,enc:1.1", tr.kind.layout(tr.config)))

    def attribution(method):
        def run():
            a = _last(attribution_steps(tr, method, SRC, OUT), Attribution)
            return {"source": a.source, "prefix": a.prefix}
        return run

    def lens():
        found = _last(logit_lens_steps(tr, SRC, OUT, top_k=3), LogitLens)
        return {"chosen_prob": found.chosen_prob, "top_probs": found.top_probs, "top_tokens": found.top_tokens,
                "chosen_rank": found.chosen_rank}

    def heads_off():
        t = tr.translate(TEXT, off)
        return {"tokens": np.array(t.tokens), "probabilities": np.array(t.probabilities)}

    return {"alti-plus": attribution("alti-plus"), "value-zeroing": attribution("value-zeroing"),
            "logit-lens": lens, "heads-off": heads_off}


def _run_together(analyses, least: int = 3, deadline_s: float = 60.0):
    """Every analysis in its own thread, each repeating until it has run ``least`` times and every other has
    finished a run while it was running (so that they really overlap); name -> results, and each thread's
    (first start, last end)."""
    names = list(analyses)
    done = {name: 0 for name in names}
    results: dict[str, list] = {name: [] for name in names}
    spans: dict[str, tuple[float, float]] = {}
    errors: list[BaseException] = []
    barrier, stop_by = threading.Barrier(len(names)), time.monotonic() + deadline_s

    def others_ran_since(name, counts):
        return all(done[other] > counts[other] for other in names if other != name)

    def run(name):
        try:
            barrier.wait(10)
            start, counts = time.monotonic(), dict(done)
            while time.monotonic() < stop_by and not (done[name] >= least and others_ran_since(name, counts)):
                results[name].append(analyses[name]())
                done[name] += 1
            spans[name] = (start, time.monotonic())
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(name,), daemon=True) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(deadline_s + 30)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads), "an analysis never ended"
    return results, spans


def test_four_analyses_of_one_model_in_four_threads_each_give_their_single_thread_result(tr):
    analyses = _analyses(tr)
    alone = {name: fn() for name, fn in analyses.items()}
    assert not np.array_equal(alone["heads-off"]["probabilities"],
                              np.array(tr.translate(TEXT).probabilities))  # the heads really are off
    together, spans = _run_together(analyses)
    starts, ends = [s for s, _ in spans.values()], [e for _, e in spans.values()]
    assert max(starts) < min(ends)  # every thread was running at one moment
    for name, runs in together.items():
        assert len(runs) >= 3
        for run in runs:
            assert run.keys() == alone[name].keys()
            for key, value in run.items():
                np.testing.assert_array_equal(value, alone[name][key], err_msg=f"{name}: {key}")


def test_an_attribution_stays_put_while_another_thread_switches_heads_off_and_on(tr):
    """Heads off in one thread (a gate opened and closed around every decode) never reach an ALTI+ capture in
    another, however their passes interleave."""
    analyses = _analyses(tr)
    alone = analyses["alti-plus"]()
    together, _ = _run_together({"alti-plus": analyses["alti-plus"], "heads-off": analyses["heads-off"]}, least=8)
    for run in together["alti-plus"]:
        np.testing.assert_array_equal(run["source"], alone["source"])
        np.testing.assert_array_equal(run["prefix"], alone["prefix"])
