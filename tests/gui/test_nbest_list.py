"""The beam's n-best list shows whole hypotheses: a long one wraps (no part of it cut off, so two that differ only
at the end look different), its full text is the row's tooltip and Ctrl+C copies it."""

import os
from pathlib import Path

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFontMetrics, QGuiApplication

from attnviz.engine.events import BeamNode, DecodeStep
from attnviz.gui.translate.search_panel import SearchPanel
from tests.gui.conftest import load
from tests.gui.test_search_view import decode

MODELS = Path(__file__).resolve().parents[2] / "models"

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
    table.clearSelection()  # the row alone, whatever modifier state an earlier test left
    table.selectRow(1)
    qtbot.keyClick(table, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    title, row = QGuiApplication.clipboard().text().split("\n")  # the column titles, then the row (as a spreadsheet)
    assert title.split("\t")[1] == "Hypothesis" and row.split("\t")[1] == TEXTS[1]


SENTENCE = "Ein kleines Mädchen in einem rosa Kleid klettert eine Treppe zu einem Spielhaus hinauf ."


@pytest.mark.parametrize("size", [(1366, 768), (1024, 700)])
def test_the_nbest_list_reads_whole_in_the_translate_tab(qtbot, window, size):
    """In the real tab at a laptop's size, a beam of 5 (hypotheses sharing their first words) is read whole: the
    Hypothesis column fits the list's viewport and each row is as tall as its wrapped text; the tree stays usable."""
    tab = load(qtbot, window, str(MODELS / "de-en-multi30k.safetensors"))
    window.resize(*size)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == size, timeout=3000)
    tab = decode(qtbot, window, SENTENCE, mode="beam", width=5)
    tab.search.side.setCurrentWidget(tab.search.panel_scroll)
    panel, table = tab.search.panel, tab.search.panel.nbest
    qtbot.waitUntil(lambda: table.isVisible() and table.rowCount() >= 5)
    table.viewport().repaint()
    metrics = QFontMetrics(table.font())
    column = table.columnWidth(1)
    assert table.columnViewportPosition(1) + column <= table.viewport().width(), (size, column)
    for row in range(table.rowCount()):
        text = table.item(row, 1).text()
        needed = metrics.boundingRect(QRect(0, 0, column - 8, 10**6), Qt.TextFlag.TextWordWrap, text)
        assert table.rowHeight(row) >= needed.height(), (size, row, text)
    page = tab.search.panel_scroll.viewport()  # the list and the tree are in sight, not scrolled out of the page
    for part in (table, panel.tree_scroll):
        top = part.mapTo(page, part.rect().topLeft()).y()
        assert 0 <= top and top + part.height() <= page.height(), (size, part.objectName(), top, page.height())
    tree = panel.tree_scroll.viewport()
    assert tree.width() >= 200 and tree.height() >= 80, (size, tree.size())
    if os.environ.get("ATTNVIZ_SHOTS"):
        window.grab().save(os.path.join(os.environ["ATTNVIZ_SHOTS"], f"beam-{size[0]}x{size[1]}.png"))
