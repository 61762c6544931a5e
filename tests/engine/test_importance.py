"""Head importance as engine events: progress after each decode, a result whose figures are the masked searches'
own BLEU, a stop between heads that ends the run, and a saved file that reads back (or is refused clearly)."""

import threading

import numpy as np
import pytest

from attnviz.engine.analysis.importance import (
    ImportanceProgress,
    ImportanceReady,
    compute_importance,
    corpus_bleu,
    importance_steps,
)
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import InputError
from attnviz.engine.heads import HeadRef

PAIRS = [("q1 q2 q3", "w3 w2 w1"), ("q4 q5 q6 q7", "w7 w6 w5 w4"), ("q8 q9", "w9 w8")]


def test_events_and_figures(trained_translator):
    events = list(importance_steps(trained_translator, PAIRS, kinds=["cross", "enc"]))
    progress = [e for e in events if isinstance(e, ImportanceProgress)]
    assert [p.done for p in progress] == list(range(1, 18)) and progress[-1].total == 17
    assert progress[0].head is None and progress[1].head == HeadRef("cross", 0, 0)
    result = events[-1]
    assert isinstance(result, ImportanceReady) and set(result.layout) == {"cross", "encoder"}
    assert result.baseline == pytest.approx(corpus_bleu(trained_translator, PAIRS, DecodeConfig()))
    some = result.heads[3]
    masked = corpus_bleu(trained_translator, PAIRS, DecodeConfig(heads_off=[(some.kind, some.layer, some.head)]))
    assert some.bleu == pytest.approx(masked) and some.delta == pytest.approx(result.baseline - masked)
    assert result.matrix("cross").shape == (2, 4) and not np.isnan(result.matrix("cross")).any()
    for h in result.heads:
        assert result.matrix(h.kind)[h.layer, h.head] == h.delta


def test_stop_between_heads_ends_without_a_result(trained_translator):
    stop = threading.Event()
    seen = []
    for event in importance_steps(trained_translator, PAIRS, kinds=["cross"], stop=stop):
        seen.append(event)
        if len(seen) == 3:
            stop.set()
    assert len(seen) == 3 and not any(isinstance(e, ImportanceReady) for e in seen)


def test_saved_json_round_trips_and_foreign_files_are_refused(trained_translator):
    result = compute_importance(trained_translator, PAIRS, kinds=["dec"])
    again = ImportanceReady.from_json(result.to_json())
    assert again.heads == result.heads and again.baseline == result.baseline and again.layout == result.layout
    for bad in ({}, {"format": "attnviz head importance 1"}, [], {"format": "x", "heads": []}):
        with pytest.raises(InputError, match="not a head-importance file"):
            ImportanceReady.from_json(bad)


def test_a_language_model_is_refused(trained_translator):
    from tests.helpers import make_toy_lm

    with pytest.raises(InputError, match="translation model"):
        list(importance_steps(make_toy_lm(), PAIRS))
    with pytest.raises(InputError, match="no sentences"):
        list(importance_steps(trained_translator, []))


def test_progress_carries_each_score_and_an_eta_and_deltas_have_seeded_intervals(trained_translator):
    events = list(importance_steps(trained_translator, PAIRS, kinds=["cross"]))
    progress, result = events[:-1], events[-1]
    assert progress[0].score is None and progress[0].baseline == result.baseline
    assert all(p.eta_s is not None and p.eta_s >= 0 for p in progress) and progress[-1].eta_s == 0
    assert sorted((p.score for p in progress[1:]), key=lambda s: (s.layer, s.head)) == sorted(
        result.heads, key=lambda s: (s.layer, s.head))  # what the partial map drew is the result
    assert all(h.interval is not None and h.interval[0] <= h.interval[1] for h in result.heads)
    again = compute_importance(trained_translator, PAIRS, kinds=["cross"])
    assert [h.interval for h in again.heads] == [h.interval for h in result.heads]  # seeded: exactly the same
    data = result.to_json()
    assert data["bootstrap"] == {"method": "paired bootstrap over sentences", "samples": 1000, "seed": 0,
                                 "level": 0.95}
    assert data["numbering"] == "1-based" and all(len(h["delta_interval"]) == 2 for h in data["heads"])
    assert ImportanceReady.from_json(data).heads == result.heads
    old = dict(data, heads=[{k: v for k, v in h.items() if k != "delta_interval"} for h in data["heads"]])
    assert all(h.interval is None for h in ImportanceReady.from_json(old).heads)  # files from before intervals
