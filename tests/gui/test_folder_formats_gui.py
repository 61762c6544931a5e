"""The app opens a folder of any registered format without naming it: File > Open model folder, a folder dropped
on the window, and the menu's tip, all with the throwaway format of ``tests/engine/test_folder_formats.py``."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QFileDialog

from attnviz.engine.hub import registered
from attnviz.gui.main_window import MainWindow
from tests.engine.test_folder_formats import DECODE, TEXT, TOY, write_toy_folder
from tests.gui.conftest import translate
from tests.helpers import make_toy_translator


def _toy_folder(tmp_path):
    translator = make_toy_translator(seed=5)
    folder = tmp_path / "toy-model"
    write_toy_folder(folder, translator)
    return folder, translator.translate(TEXT, DECODE)


def test_open_model_folder_loads_a_registered_format_and_translates(qtbot, window, tmp_path, monkeypatch):
    folder, expected = _toy_folder(tmp_path)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *args: str(folder))
    with registered(TOY):
        window.open_folder_dialog()
        qtbot.waitUntil(lambda: window.translator is not None and window.translator.metadata["path"] == str(folder),
                        timeout=20000)
    assert window.translator.config == make_toy_translator(seed=5).config
    assert window.settings.value("models/dir") == str(tmp_path)  # the next dialog opens beside it
    window.translate_tab.playback.max_len_spin.setValue(DECODE.max_len)
    tab = translate(qtbot, window, TEXT)
    assert [step.token for step in tab.document.steps if step.token != "<eos>"] == list(expected.tokens)


def test_a_dropped_folder_of_a_registered_format_is_opened(qtbot, window, tmp_path):
    folder, _ = _toy_folder(tmp_path)
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(folder))])
    enter = QDragEnterEvent(QPoint(5, 5), Qt.DropAction.CopyAction, data, Qt.MouseButton.NoButton,
                            Qt.KeyboardModifier.NoModifier)
    window.dragEnterEvent(enter)
    assert enter.isAccepted()
    with registered(TOY):
        window.dropEvent(QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, data, Qt.MouseButton.NoButton,
                                    Qt.KeyboardModifier.NoModifier))
        qtbot.waitUntil(lambda: window.translator is not None and window.translator.metadata["path"] == str(folder),
                        timeout=20000)
    assert window.translator.card.name == "toy-model"


def test_the_open_folder_item_names_every_registered_format(qtbot, settings):
    with registered(TOY):
        window = MainWindow(settings)
        qtbot.addWidget(window)
    action = next(a for a in window.findChildren(type(window.menuBar().actions()[0]))
                  if a.text() == "Open model &folder...")
    tip = action.statusTip()  # shown in the status bar while the item is highlighted
    assert "toy JSON folder (a test format)" in tip and "MarianMT" in tip
