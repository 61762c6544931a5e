"""A job faster than the window: the worker hands its events on in batches, at most once a frame, so that Qt's
queue holds one notice instead of hundreds (a tiny LLM's 256 steps froze the window for seconds); every event still
arrives, in order, before ``failed`` and ``finished``; a document shows a batch's last step once."""

from __future__ import annotations

import threading
import time

import pytest

from attnviz.engine.errors import InputError
from attnviz.gui.worker import Worker


def burst(n: int, fail: bool = False):
    def job(stop: threading.Event):
        yield from range(n)
        if fail:
            raise InputError("the job failed after its events")

    return job


@pytest.mark.parametrize("fail", [False, True])
def test_every_event_arrives_in_order_in_few_batches_before_the_end(qtbot, fail):
    worker = Worker()
    seen, batches, order = [], [], []
    worker.produced.connect(seen.append)
    worker.batched.connect(lambda items: batches.append(len(items)))
    worker.failed.connect(lambda failure: order.append(("failed", len(seen), str(failure))))
    worker.finished.connect(lambda: order.append(("finished", len(seen))))
    with qtbot.waitSignal(worker.finished, timeout=20000):
        worker.start(burst(5000, fail))
    assert seen == list(range(5000)) and sum(batches) == 5000
    assert len(batches) < 5000 / 10  # coalesced: far fewer hand-overs than events
    expected = [("failed", 5000, "the job failed after its events")] if fail else []
    assert order == [*expected, ("finished", 5000)]


def test_a_cancelled_jobs_waiting_events_are_dropped(qtbot):
    worker = Worker()
    seen: list[int] = []
    worker.produced.connect(seen.append)
    started = threading.Event()

    def job(stop: threading.Event):
        for i in range(10**6):
            started.set()
            yield i

    worker.start(job)
    assert started.wait(10)
    qtbot.waitUntil(lambda: len(seen) > 0, timeout=10000)
    worker.cancel()
    count = len(seen)
    qtbot.wait(200)
    assert len(seen) == count and seen == list(range(count))


def test_a_replaced_jobs_late_end_does_not_end_the_job_that_follows_it(qtbot):
    """A job whose thread has ended still has its end on the way; a consumer that starts the next job before the
    event loop delivers it (the foil chosen right after a result) must get every event of the new job."""
    worker = Worker()
    seen: list[int] = []
    ends: list[int] = []
    worker.produced.connect(seen.append)
    worker.finished.connect(lambda: ends.append(len(seen)))
    gate = threading.Event()

    def quick(stop: threading.Event):
        yield from ()

    def gated(stop: threading.Event):
        assert gate.wait(10)
        yield from range(3)

    worker.start(quick)
    deadline = time.monotonic() + 10
    while worker.is_running() and time.monotonic() < deadline:
        time.sleep(0.01)  # the thread ends; its ``done`` waits in Qt's queue, undelivered
    assert not worker.is_running()
    worker.start(gated)
    qtbot.wait(100)  # the first job's end is delivered now
    assert worker.is_running() and ends == []
    with qtbot.waitSignal(worker.finished, timeout=20000):
        gate.set()
    assert seen == [0, 1, 2] and ends == [3]


def test_a_batch_tells_its_last_step_shown_once_and_every_step_added():
    from attnviz.engine.config import DecodeConfig
    from attnviz.session.translate.changes import StepAdded, StepShown
    from attnviz.session.translate.document import DecodeDocument, DecodeRequest
    from tests.helpers import make_toy_translator

    translator = make_toy_translator(seed=0)
    events = list(translator.steps("q1 q2 q3", DecodeConfig(max_len=6)))
    doc = DecodeDocument()
    told: list = []
    doc.subscribe(told.append)
    doc.subscribe(lambda change: doc.go_to(change.index) if isinstance(change, StepAdded) else None)  # Instant
    doc.start(DecodeRequest("q1 q2 q3", DecodeConfig(max_len=6), False), " ".join)
    doc.add_all(events)
    steps = len(events) - 1
    assert [c.index for c in told if isinstance(c, StepAdded)] == list(range(steps))
    assert [c for c in told if isinstance(c, StepShown)] == [StepShown(steps - 1)]  # once, the last, at the end
    assert isinstance(told[-1], StepShown) and doc.current == steps - 1


@pytest.mark.parametrize(("per_map", "signed", "hide"), [(False, False, False), (True, False, False),
                                                         (False, True, False), (False, False, True)])
def test_a_grids_images_coloured_at_once_are_each_maps_own(per_map, signed, hide):
    import numpy as np

    from attnviz.gui.attention.colormap import to_image, to_images

    rng = np.random.default_rng(0)
    maps = rng.random((3, 4, 5, 6)).astype(np.float32) * (2 if signed else 1) - (1 if signed else 0)
    maps[0, 1] = 0.0  # a flat map
    maps[1, 2, 0, 0] = np.nan  # nothing measured
    hidden = [rng.random((5, 6)) > 0.7 if hide else None, None, None]
    together = to_images(maps, per_map, signed, hidden)
    for i in range(3):
        for h in range(4):
            alone = to_image(maps[i, h], per_map, signed, hidden[i])
            assert together[i][h] == alone, (i, h)
