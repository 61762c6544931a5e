"""One generic worker: runs a job (an engine generator) in a thread and forwards each event it yields through a Qt
signal, ``produced``; a job that raises ends with ``failed`` carrying a typed ``JobFailure``; ``finished`` comes last.

The thread is a daemon Python thread, not a QThread: a job can be stuck where no stop flag is read (a model being
read from a slow disk, a network call), and Qt aborts the process when a running QThread is destroyed, which
Python's shutdown does to every object it frees. A daemon thread is simply left behind; the signals it emits reach
GUI-thread receivers queued, as a QThread's would. ``run_gui`` still leaves through ``os._exit`` when a job is
stuck, so that no library tears itself down under it.

Stopping goes through a ``threading.Event`` that the generator (or this loop) checks between events, because a busy
worker thread never runs queued slots. How a job stops is declared by its type (``handles_stop``, see ``Job``), not
by whoever starts it. Pausing blocks between events. Consumers connect the signals to ``@Slot`` methods of
GUI-thread objects, never to lambdas (in PySide6 a lambda runs in the emitting thread). The app's ``collector``
keeps Python's cyclic garbage collection out of these threads.

Jobs of every tab share the loaded model and run side by side, with no lock: whatever a job reads or changes inside
the network (ALTI+'s captures, norm-weighted attention, the logit lens, value zeroing, heads switched off, forced
embeddings) goes through the network's probe points (``engine.models.probes``), scoped to the job's thread, so a
decode running meanwhile neither sees nor disturbs it. Nothing else on the model changes while jobs run: they put it
in eval mode, which it already is; gradients are taken with respect to inputs and gates, never accumulated on its
weights; ``torch.inference_mode`` is thread-local; the Train tab trains a network of its own; and a new precision
loads a new model rather than converting the one in use.
"""

from __future__ import annotations

import atexit
import threading
import time
import traceback
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from PySide6.QtCore import QObject, QTimer, Signal, Slot
from shiboken6 import isValid

from attnviz.engine.errors import AttnvizError

# Threads still running when their worker gave up waiting (a job stuck in a system call), with their runners, which
# must not be freed in the job's thread (a QObject's destructor belongs to the GUI thread). ``run_gui`` ends the
# process without teardown while any is still running.
STUCK: list[tuple[threading.Thread, QObject]] = []

# Every worker that exists, registered by its constructor: closing the window stops them all (``live_workers``), so
# a worker added to any tab later is stopped without a list to keep up to date.
_LIVE: weakref.WeakSet[Worker] = weakref.WeakSet()

OUT_OF_MEMORY = "Out of memory. Close other programs or use a smaller model or batch."
FRAME_S = 1 / 30  # the least time between two hand-overs of a job's events (``Worker``): redraws at a screen's pace


class Job(Protocol):
    """Long work for a worker: called once, in the worker's thread, with the stop event; returns its events.

    Its class may declare ``handles_stop = True`` when the generator itself reacts to the stop event and winds down
    (training saves a checkpoint, then ends): the worker then delivers every event until it ends. Any other job is
    dropped between two events once stopped. A plain function is a job that does not handle stop.
    """

    def __call__(self, stop: threading.Event, /) -> Iterable[Any]: ...


def handles_stop(job: Job) -> bool:
    """Whether ``job``'s type declares that it winds down by itself when asked to stop (see ``Job``)."""
    return getattr(type(job), "handles_stop", False) is True


@dataclass(frozen=True)
class JobFailure:
    """Why a job ended early, as plain data that may cross threads (an exception would carry its frames along).

    ``error`` is the exception's class; ``settings`` and ``corpus`` are what an ``AttnvizError`` names for the user
    to change; ``details`` is the last frames of an unexpected error (a bug). ``str()`` is the text to show."""

    error: type[BaseException]
    message: str
    settings: tuple[str, ...] = ()
    corpus: str | None = None
    details: str = ""

    @classmethod
    def of(cls, exc: BaseException) -> JobFailure:
        """The failure of ``exc``, caught in the job's thread (so that the traceback is at hand)."""
        if isinstance(exc, AttnvizError):
            return cls(type(exc), str(exc), tuple(exc.settings), exc.corpus)
        return cls(type(exc), str(exc), details="" if isinstance(exc, MemoryError) else traceback.format_exc(limit=6))

    @property
    def expected(self) -> bool:
        """A failure the user can fix (an ``AttnvizError``, or memory), not a bug."""
        return issubclass(self.error, (AttnvizError, MemoryError))

    @property
    def text(self) -> str:
        """What a user reads: the engine's message as is, or what to do about memory, or a bug with its frames."""
        if issubclass(self.error, AttnvizError):
            return self.message
        if issubclass(self.error, MemoryError):
            return OUT_OF_MEMORY
        return f"Unexpected error: {self.message}\n\n{self.details}"

    def __str__(self) -> str:
        return self.text


class _Runner(QObject):
    """Lives in the GUI thread; ``run`` is called in the job's thread, so its signals reach the worker queued.

    Events are coalesced: the job's thread appends each to ``pending`` and posts ``ready`` only when none is posted
    yet, and the GUI thread takes everything pending at once (``take``). A job faster than the window (a tiny LLM
    decoding hundreds of steps a second) thus leaves one event in Qt's queue, not hundreds that would starve the
    event loop's timers and painting for seconds. Every event is taken before ``done`` arrives: it is posted after
    the last event was appended, behind a ``ready`` that takes it."""

    ready = Signal()
    failed = Signal(object)  # JobFailure
    done = Signal()

    def __init__(self, job: Job, stop: threading.Event, resume: threading.Event):
        super().__init__()
        self._job, self._stop, self._resume = job, stop, resume
        self._lock = threading.Lock()
        self._pending: list[Any] = []
        self._posted = False  # a ``ready`` is on its way to the GUI thread

    def _post(self, item: Any) -> None:
        with self._lock:
            self._pending.append(item)
            if self._posted:
                return
            self._posted = True
        self.ready.emit()

    def take(self) -> list[Any]:
        """Every event the job yielded since the last take, in order (GUI thread)."""
        with self._lock:
            items, self._pending, self._posted = self._pending, [], False
        return items

    def run(self) -> None:
        winds_down = handles_stop(self._job)
        try:
            for item in self._job(self._stop):
                self._resume.wait()
                if self._stop.is_set() and not winds_down:
                    break
                self._post(item)
        except BaseException as exc:  # tokenizers' PanicException too; the interpreter's own exits pass on
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            self.failed.emit(JobFailure.of(exc))  # an AttnvizError is the user's to fix; anything else is a bug
        finally:
            self.done.emit()


class Worker(QObject):
    """Owns one job at a time. ``start(job)`` cancels any running job first."""

    produced = Signal(object)  # each event the job yields
    batched = Signal(object)  # the events that arrived together, as a list (before their ``produced``)
    failed = Signal(object)  # a JobFailure
    finished = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._thread: threading.Thread | None = None
        self._runner: _Runner | None = None
        # events are handed on at most once a frame: between two hand-overs the event loop paints and runs timers
        self._frame = QTimer(self)
        self._frame.setSingleShot(True)
        self._frame.timeout.connect(self._hand_over)
        self._handed = 0.0  # when the last hand-over ended (time.monotonic)
        self._retired: list[tuple[threading.Thread, _Runner]] = []  # cancelled jobs still winding down: keep them
        self._stop = threading.Event()
        self._resume = threading.Event()
        self._resume.set()
        _LIVE.add(self)

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, job: Job) -> None:
        self.cancel()
        self._stop, self._resume = threading.Event(), threading.Event()
        self._resume.set()
        runner = _Runner(job, self._stop, self._resume)
        runner.ready.connect(self._on_runner_ready)
        runner.failed.connect(self._on_runner_failed)
        runner.done.connect(self._on_runner_done)
        thread = threading.Thread(target=runner.run, name=f"attnviz-job-{getattr(job, '__name__', type(job).__name__)}",
                                  daemon=True)
        self._thread, self._runner = thread, runner
        thread.start()

    def cancel(self) -> None:
        """Ask the running job to stop; its remaining events are dropped."""
        self._retired = [(t, r) for t, r in self._retired if t.is_alive()]
        if self._runner is not None and self._thread is not None:
            self._runner.ready.disconnect(self._on_runner_ready)
            self._runner.failed.disconnect(self._on_runner_failed)
            self._runner.done.disconnect(self._on_runner_done)
            self._retired.append((self._thread, self._runner))
        self._stop.set()
        self._resume.set()
        self._runner = None
        self._thread = None

    def request_stop(self) -> None:
        """Ask the job to stop but keep receiving its last events (a job that handles stop saves and reports)."""
        self._stop.set()
        self._resume.set()

    def pause(self, paused: bool) -> None:
        (self._resume.clear if paused else self._resume.set)()

    def wait(self, msecs: int) -> bool:
        """Wait, at most ``msecs`` in all, for every thread of this worker to end; only for shutdown. Threads still
        running then are kept in ``STUCK``."""
        jobs = list(self._retired) + ([(self._thread, self._runner)] if self._thread is not None and
                                      self._runner is not None else [])
        deadline = time.monotonic() + msecs / 1000
        for thread, _ in jobs:
            thread.join(max(0.0, deadline - time.monotonic()))
        STUCK.extend(job for job in jobs if job[0].is_alive() and job not in STUCK)
        return not any(thread.is_alive() for thread, _ in jobs)

    def _from_current_job(self) -> bool:
        """Whether the runner signal being delivered is the current job's. A runner's signals are queued: one that
        ended (its thread no longer alive) may still have ``done`` on its way when a consumer starts the next job,
        and disconnecting does not withdraw what is already posted; that late ``done`` must not end the new job."""
        return self._runner is not None and self.sender() is self._runner

    @Slot()
    def _on_runner_ready(self) -> None:
        if not self._from_current_job():
            return  # an old job's notice: its events were dropped when it was cancelled
        if self._frame.isActive():
            return  # the next hand-over takes these too
        wait = FRAME_S - (time.monotonic() - self._handed)
        if wait > 0:
            self._frame.start(max(1, round(wait * 1000)))
        else:
            self._hand_over()

    @Slot()
    def _hand_over(self) -> None:
        """Every event the job yielded since the last hand-over: ``batched`` once, then ``produced`` each."""
        self._frame.stop()
        runner = self._runner
        if runner is None:
            return  # cancelled meanwhile: its events are dropped
        items = runner.take()
        if not items:
            return
        try:
            self.batched.emit(items)
            for item in items:
                if self._runner is not runner:
                    return  # a consumer started another job or cancelled this one: the rest is dropped
                self.produced.emit(item)
        finally:
            self._handed = time.monotonic()

    @Slot(object)
    def _on_runner_failed(self, failure: JobFailure) -> None:
        if not self._from_current_job():
            return
        self._hand_over()  # the events before the failure first
        self.failed.emit(failure)

    @Slot()
    def _on_runner_done(self) -> None:
        if not self._from_current_job():
            return  # a replaced job's end, delivered late: the job running now goes on
        self._hand_over()  # what waits for the next frame comes before the end
        if self._thread is not None and self._runner is not None:
            self._retired.append((self._thread, self._runner))  # its thread ends right after this
        self._runner, self._thread = None, None
        self.finished.emit()


def wait_all(workers: Iterable[Worker], msecs: int) -> bool:
    """Cancel every worker's job and wait for them together, at most ``msecs`` in all (closing the app must not wait
    once per worker); whether all ended. Those still running are kept in ``STUCK``."""
    workers = list(workers)
    for worker in workers:
        worker.cancel()
    deadline = time.monotonic() + msecs / 1000
    return all([worker.wait(max(0, round((deadline - time.monotonic()) * 1000))) for worker in workers])


def live_workers(root: QObject) -> list[Worker]:
    """Every worker that exists now under ``root`` (its parents lead there) or under no window at all (a worker
    made without a parent): what closing ``root`` stops. Workers of another top-level object are left alone."""
    found = []
    for worker in list(_LIVE):
        if not isValid(worker):
            continue
        top: QObject = worker
        while (parent := top.parent()) is not None:
            top = parent
        if top is root or top is worker:
            found.append(worker)
    return found


EXIT_WAIT_S = 10.0  # at interpreter exit, how long jobs still computing get to notice their stop flags


@atexit.register
def _join_stuck_at_exit() -> None:
    """When Python exits as usual after the window closed (a script, a test harness: ``run_gui`` leaves through
    ``os._exit`` instead), a job that was still inside one long computation (a batched backward pass of integrated
    gradients) would be torn down mid-computation, which aborts the process (SIGABRT): give such jobs a bounded
    time to reach their next stop check. A job blocked in a system call is waited for no longer than that."""
    deadline = time.monotonic() + EXIT_WAIT_S
    for thread, _ in list(STUCK):
        thread.join(max(0.0, deadline - time.monotonic()))


def any_stuck() -> bool:
    """Whether a job kept in ``STUCK`` is still running (the process must then end without teardown)."""
    return any(thread.is_alive() for thread, _ in STUCK)
