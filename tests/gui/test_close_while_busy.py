"""Closing the window while a job cannot stop (a model read from a stalled disk, a stalled download) ends the process
cleanly: exit 0, no 'QThread: Destroyed while thread is still running' abort, and the settings written (issue 30).

Each case runs the app in a subprocess, because the failure being guarded against kills the process. The load job is
replaced by one that blocks on an event nothing sets and ignores its stop flag. The timeout only detects a hang."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HANG = 120  # seconds: far above the 2 s closing takes; only there so that a hang fails instead of stalling the run

PRELUDE = """
import sys, threading
from PySide6.QtCore import QTimer
import attnviz.engine.loading as loading
import attnviz.gui.main_window as main_window

def blocked(path, *settings):  # load_translator(path, dtype)
    print("load started", flush=True)
    threading.Event().wait()  # a read that never returns, deaf to the stop flag

loading.load_translator = blocked

def close_when_loading(window):
    def check():
        if window.loader.is_running():
            window.close()
        else:
            QTimer.singleShot(20, check)
    QTimer.singleShot(20, check)
"""

# Through the app's own entry point, with its settings in the config home the test gives it.
VIA_RUN_GUI = PRELUDE + """
from attnviz.gui import app
shown = main_window.MainWindow.show
def show(self):
    shown(self)
    close_when_loading(self)
main_window.MainWindow.show = show
sys.exit(app.run_gui(sys.argv[1]))
"""

# A host that closes the window and then lets Python shut down as usual (a script, a test harness, an embedding).
VIA_PLAIN_EXIT = PRELUDE + """
from PySide6.QtCore import QSettings
from attnviz.gui.app import make_app
qt = make_app()
window = main_window.MainWindow(QSettings(sys.argv[2], QSettings.Format.IniFormat))
window.show()
QTimer.singleShot(0, lambda: window.load_model(sys.argv[1]))
close_when_loading(window)
qt.exec()
print("event loop ended", flush=True)
"""


def _run(script: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "config"),
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    model = tmp_path / "slow.safetensors"
    model.write_bytes(b"never read: the load blocks first")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), str(model), *args], env=env,
                          capture_output=True, text=True, timeout=HANG)


@pytest.mark.parametrize("script", [VIA_RUN_GUI, VIA_PLAIN_EXIT], ids=["run_gui", "plain-exit"])
def test_closing_during_a_load_that_never_ends_exits_cleanly(script, tmp_path):
    settings = tmp_path / "settings.ini"
    result = _run(script, tmp_path, str(settings))
    assert "load started" in result.stdout
    assert result.returncode == 0, result.stderr
    assert "Destroyed while thread" not in result.stderr and "Traceback" not in result.stderr
    written = settings if script is VIA_PLAIN_EXIT else tmp_path / "config" / "attnviz" / "attnviz.conf"
    assert "geometry" in written.read_text(encoding="utf-8", errors="replace")  # saved before leaving


def test_a_stuck_job_is_left_running_not_waited_for(qtbot):
    import threading

    from attnviz.gui import worker as worker_module

    release = threading.Event()

    def stuck(stop):
        release.wait(30)
        yield from ()

    workers = [worker_module.Worker() for _ in range(3)]
    for w in workers:
        w.start(stuck)
    assert not worker_module.wait_all(workers, 100)  # one shared budget, not one per worker
    assert worker_module.any_stuck() and not any(w.is_running() for w in workers)  # cancelled, kept alive
    release.set()
    for thread, _ in list(worker_module.STUCK):
        thread.join(5)
    assert not worker_module.any_stuck()
    worker_module.STUCK.clear()


# Integrated gradients running when the window closes, and Python then shutting down as usual: the job's thread must
# have ended (its stop flag is read between batched passes), not be torn down mid-backward (SIGABRT, issue 38).
CLOSE_DURING_GRADIENTS = """
import atexit, sys, threading
# registered before attnviz's own hook, so it runs after it (last in, first out): what Python's teardown meets
atexit.register(lambda: print("jobs alive at teardown:", [t.name for t in threading.enumerate()
                                                          if t.name.startswith("attnviz-job")], flush=True))
from PySide6.QtCore import QSettings, QTimer
from attnviz.gui.app import make_app
from attnviz.gui.main_window import MainWindow
qt = make_app()
window = MainWindow(QSettings(sys.argv[2], QSettings.Format.IniFormat))
window.show()
tab = window.translate_tab

def when(test, then):
    QTimer.singleShot(20, lambda: then() if test() else when(test, then))

def attribute():
    tab.playback.instant_check.setChecked(True)
    tab.source_edit.setText(" ".join(f"q{i % 10 + 1}" for i in range(20)))
    tab.translate()
    when(lambda: tab.document.finished, gradients)

def gradients():
    tab.quantity.choose("integrated-gradients")  # its thread has just started: close at once, mid-computation
    if tab.quantity.worker.is_running():
        close()

def close():
    print("gradients running", flush=True)
    window.close()

window.load_model(sys.argv[1])
when(lambda: window.translator is not None, attribute)
qt.exec()
print("event loop ended", flush=True)
"""


def test_closing_while_integrated_gradients_run_exits_cleanly(tmp_path, toy_checkpoint):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "config"),
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run([sys.executable, "-c", CLOSE_DURING_GRADIENTS, toy_checkpoint, str(tmp_path / "s.ini")],
                            env=env, capture_output=True, text=True, timeout=HANG)
    assert "gradients running" in result.stdout and "event loop ended" in result.stdout, result.stderr
    assert "jobs alive at teardown: []" in result.stdout, result.stdout
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "terminate" not in result.stderr
