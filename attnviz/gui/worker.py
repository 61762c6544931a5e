"""One generic worker: runs an engine generator in a QThread and forwards each event through a Qt signal.

Stopping goes through a ``threading.Event`` that the generator (or this loop) checks between events, because a busy
worker thread never runs queued slots. Pausing blocks between events. Consumers connect ``event``/``failed``/
``done`` to ``@Slot`` methods of GUI-thread objects, never to lambdas (in PySide6 a lambda runs in the emitting thread).
The app's ``collector`` keeps Python's cyclic garbage collection out of these threads.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from attnviz.engine.errors import AttnvizError

# Threads still running when their worker gave up waiting (a job stuck in a system call). Destroying a running
# QThread aborts the process, so they are kept here for the life of the process; ``run_gui`` then ends the process
# without tearing them down.
STUCK: list[tuple[QThread, QObject]] = []


class _Runner(QObject):
    event = Signal(object)
    failed = Signal(str)
    done = Signal()

    def __init__(self, factory: Callable[[threading.Event], Iterator[Any]], stop: threading.Event,
                 resume: threading.Event):
        super().__init__()
        self._factory, self._stop, self._resume = factory, stop, resume

    @Slot()
    def run(self) -> None:
        try:
            for item in self._factory(self._stop):
                self._resume.wait()
                if self._stop.is_set() and not getattr(self._factory, "handles_stop", False):
                    break
                self.event.emit(item)
        except AttnvizError as exc:
            self.failed.emit(str(exc))
        except MemoryError:
            self.failed.emit("Out of memory. Close other programs or use a smaller model or batch.")
        except Exception as exc:  # a bug: show it rather than losing the thread silently
            self.failed.emit(f"Unexpected error: {exc}\n\n{traceback.format_exc(limit=6)}")
        finally:
            self.done.emit()


class Worker(QObject):
    """Owns one thread at a time. ``start(factory)`` cancels any running job first.

    ``factory(stop_event)`` returns an iterator of events. Set ``factory.handles_stop = True`` when the generator
    reacts to the stop event itself (training saves a checkpoint before it ends).
    """

    event = Signal(object)
    failed = Signal(str)
    finished = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._thread: QThread | None = None
        self._runner: _Runner | None = None
        self._retired: list[tuple[QThread, _Runner]] = []  # cancelled jobs still winding down: keep them alive
        self._stop = threading.Event()
        self._resume = threading.Event()
        self._resume.set()

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.isRunning()

    def start(self, factory: Callable[[threading.Event], Iterator[Any]]) -> None:
        self.cancel()
        self._stop, self._resume = threading.Event(), threading.Event()
        self._resume.set()
        thread, runner = QThread(), _Runner(factory, self._stop, self._resume)
        runner.moveToThread(thread)
        runner.event.connect(self._on_runner_event)
        runner.failed.connect(self._on_runner_failed)
        runner.done.connect(thread.quit, Qt.ConnectionType.DirectConnection)  # quit is thread-safe
        runner.done.connect(self._on_runner_done)
        thread.started.connect(runner.run)
        self._thread, self._runner = thread, runner
        thread.start()

    def cancel(self) -> None:
        """Ask the running job to stop; its remaining events are dropped."""
        self._retired = [(t, r) for t, r in self._retired if t.isRunning()]
        if self._runner is not None and self._thread is not None:
            self._runner.event.disconnect(self._on_runner_event)
            self._runner.failed.disconnect(self._on_runner_failed)
            self._runner.done.disconnect(self._on_runner_done)
            self._retired.append((self._thread, self._runner))
        self._stop.set()
        self._resume.set()
        self._runner = None
        self._thread = None

    def request_stop(self) -> None:
        """Ask the job to stop but keep receiving its last events (training saves and reports)."""
        self._stop.set()
        self._resume.set()

    def pause(self, paused: bool) -> None:
        (self._resume.clear if paused else self._resume.set)()

    def wait(self, msecs: int) -> bool:
        """Wait (bounded) for every thread of this worker to end; only for shutdown."""
        jobs = list(self._retired) + ([(self._thread, self._runner)] if self._thread is not None else [])
        ended = [t.wait(msecs) for t, _ in jobs]
        STUCK.extend(job for job, done in zip(jobs, ended) if not done)
        return all(ended)

    @Slot(object)
    def _on_runner_event(self, item: Any) -> None:
        self.event.emit(item)

    @Slot(str)
    def _on_runner_failed(self, message: str) -> None:
        self.failed.emit(message)

    @Slot()
    def _on_runner_done(self) -> None:
        if self._thread is not None and self._runner is not None:
            self._retired.append((self._thread, self._runner))  # its event loop quits right after this
        self._runner, self._thread = None, None
        self.finished.emit()
