"""Starting the desktop app: the QApplication, the main window painted first, then the model in the background."""

from __future__ import annotations

import os
import signal
import sys

from PySide6.QtCore import QSettings, QTimer
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from attnviz.gui import collector
from attnviz.gui.main_window import MainWindow
from attnviz.gui.precision import KEY as PRECISION_KEY
from attnviz.gui.widgets import stored
from attnviz.gui.worker import any_stuck
from attnviz.paths import resources_dir
from attnviz.session.model_list import default_model_path


def make_app(argv: list[str] | None = None) -> QApplication:
    running = QApplication.instance()
    app = running if isinstance(running, QApplication) else QApplication(argv or sys.argv[:1])
    app.setOrganizationName("attnviz")
    app.setApplicationName("attnviz")
    icon = resources_dir() / "attnviz.svg"
    if icon.exists():
        app.setWindowIcon(QIcon(str(icon)))
    app.setStyleSheet(load_stylesheet())
    collector.install(app)  # worker threads must never run Qt objects' destructors
    return app


def load_stylesheet() -> str:
    """The app's stylesheet from resources/, or none (the platform style) when it cannot be read."""
    try:
        return (resources_dir() / "style.qss").read_text(encoding="utf-8")
    except OSError:
        return ""


def initial_model(window: MainWindow, checkpoint: str | None) -> str | None:
    """The model to open first: the one asked for, else the last one used, else the default bundled model."""
    if checkpoint:
        return checkpoint
    from pathlib import Path

    last = stored(window.settings, "models/last", "")
    return last if last and Path(last).exists() else default_model_path()


def close_on_signals(window: MainWindow) -> QTimer:
    """SIGINT (Ctrl+C in the terminal) and SIGTERM close ``window`` through its close path (jobs stopped, a running
    training saved, nothing asked since nobody is there to answer). Python runs signal handlers only between its own
    bytecodes, so a timer (a child of the window) lets it run a little while Qt's event loop waits."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: QTimer.singleShot(0, window.close))
    wake = QTimer(window)
    wake.timeout.connect(lambda: None)
    wake.start(200)
    return wake


def run_gui(checkpoint: str | None = None, dtype: str | None = None) -> int:
    """The app, opening ``checkpoint`` (else the last or the bundled model); ``dtype`` sets the remembered
    precision (File > Precision)."""
    app = make_app()
    settings = QSettings()
    if dtype:
        settings.setValue(PRECISION_KEY, dtype)
    window = MainWindow(settings)
    window.show()
    close_on_signals(window)
    path = initial_model(window, checkpoint)
    if path:
        QTimer.singleShot(0, lambda: window.load_model(path))
    else:
        window.statusBar().showMessage("No bundled model found: open a checkpoint with File > Open (Ctrl+O).")
    code = app.exec()
    if any_stuck():  # a job never ended (settings are saved): leave without tearing libraries down under it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
