"""Activation patching in the Translate tab's Quantity selector: offered for a Transformer, computed on the finished
translation into the attribution map (one map per layer, the last decoder layer's own position restoring 1), its
corrupted source typed beside the selector (Enter recomputes; a corruption that does not fit says why and stays to
be corrected), remembered across restarts, and every Alt+letter still unique while its line edit shows."""

import numpy as np
from PySide6.QtCore import Qt

from attnviz.gui.main_window import MainWindow
from attnviz.session.translate.quantities import ATTRIBUTION
from tests.gui.conftest import translate
from tests.gui.test_keyboard import assert_unique
from tests.gui.test_quantities import SENTENCE, ready


def _corrupt(qtbot, tab, text: str) -> None:
    edit = tab.quantity.bar.corrupt_edit
    edit.setText(text)
    edit.editingFinished.emit()


def _next_tab_stop(widget):
    """The widget Tab moves to from ``widget``: the next in the focus chain that is shown and takes Tab focus."""
    found = widget.nextInFocusChain()
    while found is not widget and not (found.isVisible() and found.isEnabled()
                                       and found.focusPolicy() & Qt.FocusPolicy.TabFocus):
        found = found.nextInFocusChain()
    return found


def test_patching_is_offered_and_fills_the_map(qtbot, loaded):
    tab = translate(qtbot, loaded, SENTENCE)
    bar = tab.quantity.bar
    offered = [bar.combo.itemText(i) for i in range(bar.combo.count())]
    assert "Activation patching" in offered and not bar.corrupt_box.isVisibleTo(tab)
    tab.go_to(1)
    ready(qtbot, loaded, "patching")
    panel, result = tab.attention, tab.quantity.result
    assert bar.corrupt_box.isVisibleTo(tab) and bar.corrupt_edit.placeholderText() == "<unk> everywhere"
    s, t = len(tab.document.src_tokens), len(tab.document.steps)
    maps = result.maps[ATTRIBUTION.key]
    assert panel.kind == ATTRIBUTION.key and maps.shape == (2, 1, t, s + t)
    np.testing.assert_allclose(np.diagonal(maps[-1, 0, :, s:]), 1.0, atol=1e-4)  # the last layer at its own step
    assert "Corrupted run: every source token" in panel.caption.text()
    assert _next_tab_stop(bar.combo) is bar.corrupt_edit  # no letter of its own: Tab from Alt+Q reaches it
    assert_unique(loaded)


def test_a_typed_corruption_recomputes_and_a_wrong_one_says_why(qtbot, loaded):
    tab = translate(qtbot, loaded, SENTENCE)
    ready(qtbot, loaded, "patching")
    control = tab.quantity
    _corrupt(qtbot, tab, "2=q5")
    qtbot.waitUntil(lambda: control.result is not None and control.result.settings.get("corrupt") == "2=q5",
                    timeout=20000)
    assert control.result.settings["corrupted_source"] == "<sos> q5 q2 q3 q1 <eos>"
    with qtbot.waitSignal(control.status, timeout=20000,
                          check_params_cb=lambda text: "failed" in text) as failed:
        _corrupt(qtbot, tab, "q1 q2")
    assert "reads as 4 tokens" in failed.args[0] and "the source as 6" in failed.args[0]
    assert control.wanted.key == "patching" and control.bar.corrupt_box.isVisibleTo(tab)  # stays, to be corrected
    with qtbot.waitSignal(control.status, timeout=2000) as refused:
        _corrupt(qtbot, tab, "0=q5")
    assert "count from 1" in refused.args[0] and control.wanted.settings["corrupt"] == "q1 q2"


def test_the_corruption_is_remembered(qtbot, loaded, settings, toy_checkpoint):
    tab = translate(qtbot, loaded, SENTENCE)
    ready(qtbot, loaded, "patching")
    _corrupt(qtbot, tab, "q3=q9")
    tab.save_settings(settings)
    again = MainWindow(settings)
    qtbot.addWidget(again)
    again.load_model(toy_checkpoint)
    qtbot.waitUntil(lambda: again.translator is not None, timeout=20000)
    control = again.translate_tab.quantity
    assert control.wanted.key == "patching" and dict(control.wanted.settings) == {"corrupt": "q3=q9"}
    assert control.bar.corrupt_edit.text() == "q3=q9"


def test_a_remembered_corruption_the_engine_refuses_is_dropped(qtbot, settings, toy_checkpoint):
    settings.setValue("translate/quantitySettings", '{"patching": {"corrupt": "0=q5"}}')
    window = MainWindow(settings)
    qtbot.addWidget(window)
    window.load_model(toy_checkpoint)
    qtbot.waitUntil(lambda: window.translator is not None, timeout=20000)
    control = window.translate_tab.quantity
    control.choose("patching")
    assert "corrupt" not in control.wanted.settings and control.bar.corrupt_edit.text() == ""
