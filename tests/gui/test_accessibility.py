"""What a screen reader and the clipboard get: the translation as text, the token strips, the heatmap's current
cell, the top-k chart and the step table; and every warning of a translation."""

from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import QApplication

from attnviz.gui.accessible import value_of
from tests.gui.conftest import translate


def test_the_translation_is_selectable_text_with_a_copy_action(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    text = tab.translation_text
    assert text.text() == loaded.translator.detokenize(["w3", "w2", "w1"]) and text.text()
    assert text.edit.isReadOnly() and text.copy_button.isEnabled()
    assert value_of(text.edit) == text.text()  # a line edit's accessible value is its text
    QApplication.clipboard().clear()
    text.copy_button.click()
    assert QApplication.clipboard().text() == text.text()
    tab.playback.slider.setValue(0)  # scrubbing does not shorten the finished sentence
    assert text.text() == loaded.translator.detokenize(["w3", "w2", "w1"])


def test_token_strips_top_k_and_heatmap_have_accessible_values(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    source = value_of(tab.source_view)  # the tokens, then the shading of the current step's cross-attention
    assert source.startswith("<sos> q1 q2 q3 <eos>. Shading, relative to the strongest: <sos> ")
    assert "100%" in source  # relative to the row's maximum
    assert value_of(tab.output_view) == "w3 w2 w1 <eos>"
    tab.source_view.set_tokens([])
    assert value_of(tab.source_view) == tab.source_view._placeholder
    assert value_of(tab.topk_view).startswith("Chosen: <eos> (")
    heatmap = tab.attention.heatmap
    tab.attention.select(kind="cross", layer=1, head=0)
    assert "4 rows" in value_of(heatmap) and "5 columns" in value_of(heatmap)
    heatmap.setFocus()
    qtbot.keyClick(heatmap, Qt.Key.Key_Down)  # first arrow: the top-left cell
    qtbot.keyClick(heatmap, Qt.Key.Key_Right)
    qtbot.keyClick(heatmap, Qt.Key.Key_Down)
    assert heatmap.current == (1, 1)
    weight = heatmap.data().matrix[1, 1]
    assert f"row 2 of 4 'w2', column 2 of 5 'q1': weight {weight:.4f}" in value_of(heatmap)
    assert QAccessible.queryAccessibleInterface(heatmap).text(QAccessible.Text.Name) == "Attention heatmap"


def test_step_table_cells_are_described_in_words(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    model = tab.step_model
    step = tab.document.steps[1]
    for column in range(model.columnCount()):
        text = model.data(model.index(1, column), Qt.ItemDataRole.AccessibleTextRole)
        assert text.startswith(f"Step 2: 'w2', probability {step.probability:.4f}")
        assert "runner-up" in text
    assert model.data(model.index(1, 4), Qt.ItemDataRole.ToolTipRole) == text


def test_every_warning_is_shown_and_cleared_on_a_new_sentence(qtbot, loaded):
    tab = loaded.translate_tab
    long_text = " ".join(["zz"] * 40)  # unknown words, and longer than the toy model reads
    translate(qtbot, loaded, long_text)
    shown = tab.message.messages()
    # the input's two, and the length warning exactly when this CPU's toy translation ran to the step limit
    cut = tab.document.stopped_at_limit(loaded.translator.model.max_target_len) is not None
    assert len(shown) == 2 + cut, shown
    assert any("dropped" in m for m in shown) and any("vocabulary" in m for m in shown)
    assert any("reached the limit" in m for m in shown) == cut
    assert all(m.split(":")[0] in tab.message.text() for m in shown) and tab.message.isVisibleTo(tab)
    translate(qtbot, loaded, "q1 q2")
    assert tab.message.messages() == [] and not tab.message.isVisibleTo(tab)


def test_decoder_self_attention_marks_future_cells_as_masked(qtbot, loaded):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    tab.attention.select(kind="decoder", layer=0, head=0)
    data = tab.attention.heatmap.data()
    assert data.masked is not None and data.masked[0, 1] and not data.masked[1, 0] and not data.masked[1, 1]
    assert "masked" in tab.attention.heatmap.describe_cell(0, 2)
    assert "masked, not zero" in tab.attention.caption.text()
    tab.attention.select(kind="cross")
    assert tab.attention.heatmap.data().masked is None


def test_layer_and_head_survive_a_new_translation_and_a_restart(qtbot, loaded, settings, toy_checkpoint):
    tab = translate(qtbot, loaded, "q1 q2 q3")
    tab.attention.select(kind="cross", layer=0, head=2)
    translate(qtbot, loaded, "q2 q1")
    assert (tab.attention.kind, tab.attention.layer, tab.attention.head) == ("cross", 0, 2)
    loaded.close()
    from attnviz.gui.main_window import MainWindow

    again = MainWindow(settings)
    qtbot.addWidget(again)
    again.load_model(toy_checkpoint)
    qtbot.waitUntil(lambda: again.translator is not None, timeout=20000)
    tab = translate(qtbot, again, "q1 q2")
    assert (tab.attention.kind, tab.attention.layer, tab.attention.head) == ("cross", 0, 2)


def test_top_k_marks_the_token_drawn_not_just_the_likeliest(qtbot):
    from attnviz.gui.translate.topk import TopKView

    view = TopKView()
    qtbot.addWidget(view)
    view.resize(260, 230)
    view.set_candidates([("a", 0.6), ("b", 0.3), ("c", 0.1)], 0.9, chosen=("b", 0.3))  # sampling drew b
    assert value_of(view).startswith("Chosen: b (0.300).") and "b: 0.3000 (chosen)" in view.toolTip()
    assert "a: 0.6000 (chosen)" not in view.toolTip()
    view.set_candidates([("a", 0.6), ("b", 0.3)], 0.9, chosen=("z", 0.001))  # drawn from outside the top k
    assert value_of(view).startswith("Chosen: z (0.001).")
    view.grab()  # paints the "drawn: z" line without error
