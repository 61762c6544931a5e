"""The token strips from the keyboard: Tab reaches them, arrows select a chip (its attention shows as on hover),
Ctrl+C copies the chip's token or every token, Ctrl+A selects all, the context menu copies, and a screen reader
hears what is selected."""

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from attnviz.gui.accessible import value_of
from attnviz.gui.translate.tokens import ALL, TokenStrip
from tests.gui.conftest import translate


def keys(qtbot, widget, *presses):
    for key, modifier in presses:
        qtbot.keyClick(widget, key, modifier)


def clipboard_after(qtbot, widget, key=Qt.Key.Key_C) -> str:
    QApplication.clipboard().setText("EMPTY")
    qtbot.keyClick(widget, key, Qt.KeyboardModifier.ControlModifier)
    return QApplication.clipboard().text()


def test_tab_reaches_the_strips_and_ctrl_c_copies_their_tokens(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    loaded.activateWindow()
    reached = set()
    tab.source_edit.setFocus()
    for _ in range(40):  # Tab through the window: both strips are on the way
        QApplication.focusWidget().focusNextChild()
        reached.add(QApplication.focusWidget())
    assert tab.source_view in reached and tab.output_view in reached
    strip = tab.source_view
    strip.setFocus()
    assert clipboard_after(qtbot, strip) == "<sos> q1 q2 q3 <eos>"  # nothing selected: the whole strip
    keys(qtbot, strip, (Qt.Key.Key_Home, Qt.KeyboardModifier.NoModifier),
         (Qt.Key.Key_Right, Qt.KeyboardModifier.NoModifier))
    assert strip.selected() == 1 and clipboard_after(qtbot, strip) == "q1"
    assert strip.accessible_value().startswith("<sos> q1 q2 q3 <eos>. Selected: q1, token 2 of 5")
    assert value_of(strip).startswith("<sos> q1 q2 q3 <eos>. Selected: q1")
    qtbot.keyClick(strip, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    assert strip.selected() == ALL and clipboard_after(qtbot, strip) == "<sos> q1 q2 q3 <eos>"
    assert "All selected" in value_of(strip)


def test_arrows_on_the_output_strip_show_a_step_and_enter_goes_to_it(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    strip, hovered = tab.output_view, []
    strip.hovered.connect(hovered.append)
    strip.setFocus()
    keys(qtbot, strip, (Qt.Key.Key_End, Qt.KeyboardModifier.NoModifier),
         (Qt.Key.Key_Left, Qt.KeyboardModifier.NoModifier))
    assert hovered[-2:] == [3, 2] and clipboard_after(qtbot, strip) == tab.document.steps[2].token
    qtbot.keyClick(strip, Qt.Key.Key_Return)
    assert tab.document.current == 2 and strip.selected() == 2  # the strip now ends there; the chip stays selected
    qtbot.keyClick(strip, Qt.Key.Key_Escape)
    assert strip.selected() == -1 and hovered[-1] == -1


def test_the_context_menu_copies_one_token_or_all(qtbot):
    strip = TokenStrip("nothing yet")
    qtbot.addWidget(strip)
    strip.set_tokens(["a", " ", "b"])
    copy, every = strip.copy_menu().actions()
    assert not copy.isEnabled() and every.text() == "Copy &all"
    every.trigger()
    assert QApplication.clipboard().text() == "a \u2423 b"  # a blank token keeps its place in the list
    strip.select(1)
    copy, every = strip.copy_menu().actions()
    assert copy.text() == "&Copy '\u2423'" and copy.isEnabled()
    copy.trigger()
    assert QApplication.clipboard().text() == " "  # the token itself: a space pastes as a space
    strip.set_tokens(["a", " "])
    assert strip.selected() == 1  # playback shortened the strip: the chip is still there
    strip.set_tokens(["c", "d"])
    assert strip.selected() == -1  # a new sentence drops the old selection
