"""Ctrl+C and the context menu of every table copy the selected rows as tab-separated text under a line of column
titles, as a spreadsheet pastes them, not Qt's current cell alone; Copy all copies every row."""

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from attnviz.engine.records import EvalRecord
from attnviz.gui.shortcuts import ShortcutsDialog
from attnviz.gui.translate.step_model import COLUMNS
from attnviz.gui.widgets import copy_menu
from tests.gui.conftest import translate


def ctrl_c(qtbot, view) -> str:
    QApplication.clipboard().setText("EMPTY")
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    return QApplication.clipboard().text()


def step_line(step) -> str:
    return "\t".join((str(step.index + 1), step.token, f"{step.probability:.4f}", f"{step.entropy:.3f}",
                      f"{step.topk[1][0]} ({step.topk[1][1]:.3f})"))


def test_the_step_table_copies_the_selected_rows_with_the_titles(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    steps, table = tab.document.steps, tab.step_table
    table.clearSelection()
    table.selectRow(1)
    table.selectionModel().select(table.model().index(2, 0), table.selectionModel().SelectionFlag.Select
                                  | table.selectionModel().SelectionFlag.Rows)
    assert ctrl_c(qtbot, table).split("\n") == ["\t".join(COLUMNS), step_line(steps[1]), step_line(steps[2])]
    qtbot.keyClick(table, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)  # select all, then copy: every step
    assert ctrl_c(qtbot, table).split("\n") == ["\t".join(COLUMNS)] + [step_line(s) for s in steps]


def test_the_context_menu_copies_the_selection_or_everything(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2")
    table = tab.step_table
    table.clearSelection()
    menu = copy_menu(table)
    copy, every = menu.actions()
    assert copy.text().startswith("&Copy selected rows") and every.text() == "Copy &all"
    assert not copy.isEnabled() and every.isEnabled()  # nothing selected: only Copy all
    every.trigger()
    assert QApplication.clipboard().text().count("\n") == len(tab.document.steps)  # the titles and every step
    table.selectRow(0)
    copy_menu(table).actions()[0].trigger()
    assert QApplication.clipboard().text().split("\n") == ["\t".join(COLUMNS), step_line(tab.document.steps[0])]


def test_the_evaluations_and_the_settings_tables_copy_rows(qtbot, window):
    evaluations = window.train_tab.evaluations
    evaluations.add_row(EvalRecord(step=1200, epoch=2, loss=2.5, ppl=12.18, accuracy=0.41, bleu=None, seconds=61),
                        ())
    evaluations.add_row(EvalRecord(step=2400, epoch=3, loss=2.0, ppl=7.39, accuracy=0.5, bleu=17.25, seconds=130),
                        ())
    evaluations.table.selectAll()
    assert ctrl_c(qtbot, evaluations.table).split("\n") == [
        "Epoch\tStep\tVal loss\tPPL\tAccuracy\tBLEU\tTime (s)",
        "2\t1,200\t2.5000\t12.18\t0.4100\t\u2014\t61", "3\t2,400\t2.0000\t7.39\t0.5000\t17.25\t130"]
    settings = window.train_tab.form.table
    settings.selectRow(0)
    lines = ctrl_c(qtbot, settings).split("\n")
    assert lines == ["Setting\tValue", f"{settings.item(0, 0).text()}\t{settings.item(0, 1).text()}"]


def test_the_analysis_table_copies_rows_in_the_sorted_order(qtbot, window):
    tab = window.analysis_tab
    tab.table_model.set_rows([{"kind": "cross", "layer": layer, "head": 0, "entropy": e, "tags": []}
                              for layer, e in ((0, 0.5), (1, 0.25), (2, 0.75))])
    tab.table.sortByColumn(3, Qt.SortOrder.AscendingOrder)  # by entropy: the rows as the user sees them
    tab.table.selectAll()
    lines = ctrl_c(qtbot, tab.table).split("\n")
    assert lines[0].split("\t")[:4] == ["kind", "layer", "head", "entropy"]
    assert [line.split("\t")[1:4] for line in lines[1:]] == [["2", "1", "0.250"], ["1", "1", "0.500"],
                                                               ["3", "1", "0.750"]]


def test_the_shortcuts_dialog_the_window_opens_copies_rows(qtbot, window):
    window.show_shortcuts()
    dialog = window.findChild(ShortcutsDialog)
    dialog.table.selectRow(0)
    keys, action = dialog.table.item(0, 0).text(), dialog.table.item(0, 1).text()
    assert ctrl_c(qtbot, dialog.table).split("\n") == ["Keys\tAction", f"{keys}\t{action}"]
    dialog.close()
