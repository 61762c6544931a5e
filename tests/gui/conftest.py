"""GUI fixtures: a main window with private settings and the trained toy model on disk."""

import pytest
from PySide6.QtCore import QSettings

from attnviz.gui import collector
from attnviz.gui.main_window import MainWindow


@pytest.fixture(scope="session", autouse=True)
def main_thread_gc(qapp):
    """As in the app: cyclic garbage (closed windows of earlier tests) is collected on the GUI thread only."""
    gc_collector = collector.install(qapp)
    yield gc_collector
    gc_collector.stop()


@pytest.fixture()
def toy_checkpoint(tmp_path, trained_translator):
    path = tmp_path / "toy.safetensors"
    trained_translator.save(path, name="toy")
    return str(path)


@pytest.fixture()
def settings(tmp_path):
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


@pytest.fixture()
def window(qtbot, settings):
    win = MainWindow(settings)
    # pytest-qt closes widgets before fixtures tear down: stop any training first, so closing asks nothing
    qtbot.addWidget(win, before_close_func=lambda w: w.train_tab.stop_and_wait(30000))
    win.show()
    return win


@pytest.fixture()
def app_style(qapp):
    """The app's own stylesheet (a bold Translate button, a padded sentence field: a taller entry row), as the
    window is shown to users; the tests' default is the bare platform style."""
    from attnviz.gui.app import load_stylesheet

    qapp.setStyleSheet(load_stylesheet())
    yield
    qapp.setStyleSheet("")


@pytest.fixture()
def suspect_corpus(tmp_path):
    """Five toy sentences and their references in text files (source, target): a corpus to rank."""
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("q1 q2 q3\nq4 q5\nq6 q7 q8 q9\nq10\nq3 q1\n")
    tgt.write_text("w3 w2 w1\nw5 w4\nw9 w8 w7 w6\nw10\nw1 w3\n")
    return str(src), str(tgt)


@pytest.fixture()
def loaded(qtbot, window, toy_checkpoint):
    window.load_model(toy_checkpoint)
    qtbot.waitUntil(lambda: window.translator is not None, timeout=20000)
    return window


def translate(qtbot, window, text: str, instant: bool = True):
    tab = window.translate_tab
    tab.playback.instant_check.setChecked(instant)
    tab.source_edit.setText(text)
    qtbot.keyClick(tab.source_edit, "\r")
    qtbot.waitUntil(lambda: tab.document.finished, timeout=20000)
    # Token boxes and grid tiles are laid out when painted: paint now, so tests never race the event loop.
    for view in (tab.source_view, tab.output_view, tab.attention.grid, tab.attention.heatmap):
        view.repaint()
    return tab


def load_toy_lm(qtbot, window, folder, steps: int = 50):
    """A toy character language model (seed 2, trained ``steps`` steps), saved in ``folder`` and loaded."""
    from tests.helpers import make_toy_lm, train_toy_lm

    lm = make_toy_lm(seed=2)
    train_toy_lm(lm, steps=steps)
    path = str(folder / "lm.safetensors")
    lm.save(path, name="letters")
    window.load_model(path)
    qtbot.waitUntil(lambda: window.translator is not None, timeout=20000)
    return window.translate_tab


def load(qtbot, window, path: str, timeout: int = 30000):
    """Open ``path`` (a checkpoint or a model folder) in ``window`` and wait until it is the loaded model."""
    window.load_model(path)
    qtbot.waitUntil(lambda: window.translator is not None and window.translator.metadata["path"] == path,
                    timeout=timeout)
    return window.translate_tab
