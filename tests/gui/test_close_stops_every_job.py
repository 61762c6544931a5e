"""Closing the window stops every job of every worker, with no list to keep up to date (issue 38): each ``Worker``
registers itself when made and the close path stops every worker under the window. The first test finds every
place the GUI makes a worker (or a thread of its own) and fails on one the close path would not reach; the second
closes the window with every worker running (integrated gradients and head importance for real) and checks that
every job's thread ended, within a bounded wait, without a question on the screen."""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

from PySide6.QtWidgets import QMessageBox

import attnviz.gui
from attnviz.gui import worker as worker_module
from attnviz.gui.worker import Worker, live_workers
from tests.gui.conftest import translate

GUI = Path(attnviz.gui.__file__).parent
THREADS = {"Thread", "QThread", "QThreadPool", "ThreadPoolExecutor", "ProcessPoolExecutor", "Process"}


def _gui_trees():
    for path in sorted(GUI.rglob("*.py")):
        if path.name != "worker.py":
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def _called(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def worker_sites() -> list[str]:
    """Where the GUI makes a worker: 'module:line' of every ``Worker(...)`` call outside gui/worker.py."""
    return [f"{path.name}:{node.lineno}" for path, tree in _gui_trees() for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _called(node) == "Worker"]


def test_every_worker_the_gui_makes_is_one_the_close_path_stops(qtbot, window):
    own_threads = [f"{path.name}:{node.lineno}" for path, tree in _gui_trees() for node in ast.walk(tree)
                   if isinstance(node, ast.Call) and _called(node) in THREADS]
    assert own_threads == [], "run long work as a gui.worker job, which closing the window stops"
    subclasses = [f"{path.name}:{node.lineno}" for path, tree in _gui_trees() for node in ast.walk(tree)
                  if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("Worker") for b in node.bases)]
    assert subclasses == []
    sites = worker_sites()
    assert len(sites) >= 13  # the loader, Translate's 6, Train's 2, Analysis' 4 when this test was written
    reached = live_workers(window)
    assert len(reached) == len(sites), f"made at {sites}, reached by closing: {len(reached)}"
    other = Worker()  # a worker under no window is stopped too; one under another window is not
    assert other in live_workers(window)


def _until_stopped(stop: threading.Event):
    """A job that runs until asked to stop, as any job of the app must."""
    while not stop.wait(0.02):
        pass
    yield from ()


def test_closing_stops_every_worker_running_and_asks_nothing(qtbot, loaded, monkeypatch, suspect_corpus):
    def no_modal(*args, **kwargs):
        raise AssertionError("a modal question while nobody can answer")

    monkeypatch.setattr(QMessageBox, "question", no_modal)
    monkeypatch.setattr(QMessageBox, "warning", no_modal)
    tab = translate(qtbot, loaded, " ".join(f"q{i % 10 + 1}" for i in range(40)))
    tab.quantity.choose("integrated-gradients")  # the real job: a batched pass at a time
    menus = {m.title(): m for m in (a.menu() for a in tab.quantity.bar.settings_menu.actions()) if m is not None}
    max(menus["Integration steps"].actions(), key=lambda a: int(a.text())).trigger()  # the most: still running
    analysis = loaded.analysis_tab
    analysis.set_files(*suspect_corpus)
    analysis.importance.compute()  # head importance, for real
    workers = live_workers(loaded)
    for _ in range(50):  # a short real job (the suspect score) may end between the check and the count: refill
        for worker in workers:
            if not worker.is_running():
                worker.start(_until_stopped)
        threads = [worker._thread for worker in workers]
        if all(t is not None and t.is_alive() for t in threads):
            break
        qtbot.wait(20)
    assert all(t is not None and t.is_alive() for t in threads)
    assert tab.quantity.worker.is_running() and analysis.importance.worker.is_running()
    loaded.close()
    deadline = time.monotonic() + 10
    for thread in threads:
        assert thread is not None
        thread.join(max(0.0, deadline - time.monotonic()))
    assert [t.name for t in threads if t is not None and t.is_alive()] == []
    assert not any(w.is_running() for w in workers) and not worker_module.any_stuck()
