"""The beam's n-best list shows whole hypotheses: a long one wraps (no part of it cut off, so two that differ only
at the end look different), its full text is the row's tooltip and Ctrl+C copies it."""

import os

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFontMetrics, QGuiApplication

from attnviz.engine.events import BeamNode, DecodeStep
from attnviz.gui.translate.search_panel import SearchPanel

COMMON = "a young man in a blue shirt is standing on a ladder next to the old brick wall of a house"
TEXTS = [COMMON + " while a woman watches", COMMON + " while a dog barks loudly at him"]


def node(i: int, score: float) -> BeamNode:
    step = DecodeStep(0, "a", 4, 0.5, (("a", 0.5),), 1.0, None, None)
    return BeamNode(i, -1, step, score, "finished", score / 2)


def test_every_hypothesis_is_shown_whole(qtbot):
    panel = SearchPanel()
    qtbot.addWidget(panel)
    panel.resize(520, 400)
    panel.show()
    panel.set_rows([(str(r + 1), node(r, -1.0 - r), text, -0.5 - r) for r, text in enumerate(TEXTS)], 0)
    qtbot.waitUntil(lambda: panel.nbest.isVisible())
    table = panel.nbest
    table.viewport().repaint()
    metrics = QFontMetrics(table.font())
    for row, text in enumerate(TEXTS):
        item = table.item(row, 1)
        cell = table.visualItemRect(item)
        assert metrics.horizontalAdvance(text) > cell.width()  # too long for one line: it must wrap
        assert 0 <= cell.left() and cell.right() <= table.viewport().width()  # the cell is in sight
        needed = metrics.boundingRect(QRect(0, 0, cell.width() - 8, 10**6), Qt.TextFlag.TextWordWrap, text)
        assert cell.height() >= needed.height()  # every wrapped line of it is inside its cell
        assert text in item.toolTip()
    if os.environ.get("ATTNVIZ_SHOTS"):
        panel.grab().save(os.path.join(os.environ["ATTNVIZ_SHOTS"], "nbest.png"))
    table.selectRow(1)
    qtbot.keyClick(table, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    title, row = QGuiApplication.clipboard().text().split("\n")  # the column titles, then the row (as a spreadsheet)
    assert title.split("\t")[1] == "Hypothesis" and row.split("\t")[1] == TEXTS[1]
