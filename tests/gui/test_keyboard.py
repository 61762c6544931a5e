"""Keyboard access: every Alt+letter and every shortcut has one owner in each state of the window, Alt+T and Space
never stop a run, the window's shortcuts work while the sentence field has focus, and Help lists them all."""

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMenu, QTabWidget

from attnviz.gui.shortcuts import (
    VIEW_KEYS,
    ShortcutsDialog,
    clashes,
    mnemonic,
    mnemonic_owners,
    shortcut_clashes,
    shortcut_rows,
    unmarked,
)
from tests.gui.conftest import load_toy_lm, translate


def test_mnemonic_reads_the_marked_letter():
    assert mnemonic("S&top") == "t" and mnemonic("&File") == "f" and mnemonic("Tom && &Jerry") == "j"
    assert mnemonic("Plain") is None and mnemonic("Fish && chips") is None


def window_states(window):
    """Every combination of what can be on screen at once: each main tab, each page of the Translate tab's side
    tabs and of the Train tab's lower tabs; the Train tab's Pause button in both of its texts."""
    train = window.train_tab
    window.tabs.setCurrentWidget(window.translate_tab)
    yield "Translate tab"
    side = window.translate_tab.search.side  # steps, search tree, heads off
    for i in range(side.count()):
        side.setCurrentIndex(i)
        yield f"Translate tab, {side.tabText(i)!r}"
    window.tabs.setCurrentWidget(train)
    for i in range(train.lower_tabs.count()):
        train.lower_tabs.setCurrentIndex(i)
        yield f"Train tab, {train.lower_tabs.tabText(i)!r}"
    train._paused = True
    train._update_buttons()
    yield "Train tab, paused"
    train._paused = False
    train._update_buttons()
    window.tabs.setCurrentWidget(window.analysis_tab)
    yield "Analysis tab"
    for pages in window.analysis_tab.findChildren(QTabWidget):
        for i in range(pages.count()):
            pages.setCurrentIndex(i)
            yield f"Analysis tab, {pages.tabText(i)!r}"


def assert_unique(window):
    for state in window_states(window):
        assert not clashes(window), (state, clashes(window))
        assert {text.rsplit(" (", 1)[0] for text in unmarked(window)} <= set(NO_LETTER), (state, unmarked(window))
    assert not shortcut_clashes(window), shortcut_clashes(window)
    for menu in window.findChildren(QMenu):  # items of one menu have one letter each too
        letters = [mnemonic(a.text()) for a in menu.actions() if mnemonic(a.text())]
        assert len(letters) == len(set(letters)), (menu.title(), letters)


# Controls that cannot have a letter of their own, each with the reason; the test fails when one is no longer shown.
NO_LETTER = {
    "Browse...": "six on the Train tab (data folder, checkpoint, four custom files) share the text, so they cannot "
                 "each own one of its letters; Alt+D or Alt+K focuses the field and Tab its Browse...",
    "Resume a run...": "on the Train tab every letter of it has an owner (Training menu, Open latest, Start, Pause, "
                       "Model, Head, the Train tab): 20 controls there for 16 letters that their texts contain; "
                       "Training > Resume a run... is Alt+R, R",
    "Rescale remaining heads": "every letter of it is taken where the Heads off page shows (menus, tabs, the "
                               "sentence row, the attention panel); the README names the option so",
}


def test_every_button_check_box_and_labelled_field_has_a_letter(qtbot, loaded):
    left_out = set()
    for state in window_states(loaded):
        missing = [text for text in unmarked(loaded) if text.rsplit(" (", 1)[0] not in NO_LETTER]
        assert not missing, (state, missing)
        left_out.update(text.rsplit(" (", 1)[0] for text in unmarked(loaded))
    assert left_out == set(NO_LETTER)  # an entry whose control got a letter (or went) leaves the list


def test_every_mnemonic_and_shortcut_is_unique_in_every_state(qtbot, loaded):
    assert_unique(loaded)
    owners = mnemonic_owners(loaded)  # the window as it was reported: Alt+T is the Translate tab and only that
    assert owners["t"] == ["tab '&Translate' (qt_tabwidget_tabbar)"] or len(owners["t"]) == 1
    loaded.tabs.setCurrentWidget(loaded.train_tab)
    owners = mnemonic_owners(loaded)
    assert len(owners["t"]) == 1 and "tab" in owners["t"][0]
    for letter in "rplf":
        assert len(owners.get(letter, [])) <= 1, (letter, owners.get(letter))


def test_mnemonics_are_unique_in_generate_mode(qtbot, window, tmp_path):
    load_toy_lm(qtbot, window, tmp_path)
    assert window.tabs.tabText(0) == "Genera&te"
    assert_unique(window)
    assert window.translate_tab.source_edit.placeholderText().startswith("Type the first characters")
    assert "generat" in window.translate_tab.translation_text.edit.placeholderText().lower()
    assert "Generate" in window.translate_tab.attention.heatmap.placeholder


def test_alt_t_on_the_train_tab_goes_to_the_translate_tab(qtbot, window):
    window.tabs.setCurrentWidget(window.train_tab)
    window.activateWindow()
    qtbot.keyClick(window, Qt.Key.Key_T, Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(lambda: window.tabs.currentWidget() is window.translate_tab, timeout=2000)


def test_window_shortcuts_work_while_the_sentence_has_focus(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    loaded.activateWindow()
    tab.source_edit.setFocus()
    qtbot.waitUntil(tab.source_edit.hasFocus, timeout=2000)
    qtbot.keyClick(tab.source_edit, Qt.Key.Key_Home, Qt.KeyboardModifier.ControlModifier)
    assert tab.document.current == 0
    qtbot.keyClick(tab.source_edit, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
    assert tab.document.current == len(tab.document.steps) - 1
    qtbot.keyClick(tab.source_edit, Qt.Key.Key_Home)  # plain Home still edits the text
    assert tab.source_edit.cursorPosition() == 0


def test_ctrl_e_exports_from_the_sentence_field(qtbot, loaded, monkeypatch, tmp_path):
    from PySide6.QtWidgets import QFileDialog

    tab = translate(qtbot, loaded, "q1 q2")
    asked = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (asked.append(a) or ("", "")))
    tab.source_edit.setFocus()
    qtbot.keyClick(tab.source_edit, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    assert asked, "Ctrl+E did not reach Export view"


def test_loading_a_model_leaves_the_focus_in_the_model_picker(qtbot, loaded, toy_checkpoint):
    loaded.model_combo.setFocus()
    qtbot.waitUntil(loaded.model_combo.hasFocus, timeout=2000)
    loaded.translator = None
    loaded.load_model(toy_checkpoint)
    qtbot.waitUntil(lambda: loaded.translator is not None, timeout=20000)
    assert QApplication.focusWidget() is loaded.model_combo


def test_help_lists_every_shortcut(qtbot, window):
    rows = shortcut_rows(window)
    texts = {text for _, text in rows}
    for wanted in ("Export view as PNG", "First step", "Last step", "Start training", "Copy translation",
                   "Keyboard shortcuts", "Zoom in", "Fit", "Show the Train tab"):
        assert wanted in texts, wanted
    dialog = ShortcutsDialog(window)
    qtbot.addWidget(dialog)
    assert dialog.table.rowCount() == len(rows) + len(VIEW_KEYS) and len(rows) >= 18
    keys = [dialog.table.item(r, 0).text() for r in range(dialog.table.rowCount())]
    assert all(keys) and "Ctrl+E" in keys
    actions = [dialog.table.item(r, 1).text() for r in range(dialog.table.rowCount())]
    assert any(a.startswith("Head grid: switch the head off") for a in actions)  # the keys inside views follow
    assert any(a.startswith("Search tree:") for a in actions)


@pytest.mark.parametrize("paused, answer, stops", [(False, False, False), (False, True, True), (True, None, True)])
def test_stop_asks_unless_paused(qtbot, window, paused, answer, stops):
    tab = window.train_tab
    asked, stopped = [], []
    tab.confirm = lambda *args: asked.append(args) or answer
    tab.is_running = lambda: True
    tab.run.paused = paused
    tab.stop = lambda: stopped.append(True)
    tab.stop_button.setEnabled(True)
    try:
        tab.confirm_stop()
    finally:
        del tab.is_running, tab.stop  # the real ones again, so closing the window asks nothing
        tab.run.paused = False
    assert bool(stopped) == stops and bool(asked) == (not paused)
