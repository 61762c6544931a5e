"""The Qt binding must not leak references to None: on Python 3.11 a leak aborts a long GUI session."""

import sys

import pytest
from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QWidget


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="None is immortal from Python 3.12: no leak can abort")
def test_void_calls_keep_none_alive(qapp):
    widget = QWidget()
    before = sys.getrefcount(None)
    for _ in range(500):
        widget.update()
        QCoreApplication.processEvents()
    assert sys.getrefcount(None) - before > -50, "the Qt binding drops references to None (PySide6 6.12.0): pin it"
