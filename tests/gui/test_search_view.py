"""The Translate tab explores decoding (issue 18): the beam tree forms from the engine's events, a clicked node shows
exactly that hypothesis, a what-if branch hangs on the same tree, and switching heads off re-decodes with the
before/after comparison marking exactly the changed tokens."""

import numpy as np
from PySide6.QtCore import Qt
from pytestqt.exceptions import TimeoutError as QtTimeout

from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import BeamDone, BeamStep
from attnviz.engine.heads import HeadRef
from attnviz.engine.search.tree import ROOT
from attnviz.gui.translate.head_toggles import changed_tokens, marked_html
from tests.gui.conftest import translate

TEXT = "q1 q2 q3 q4"


def idle(tab) -> bool:
    """Every decode of the tab has ended and its last events have been delivered (a worker's thread stops before
    its queued events arrive, so ``is_running`` alone would race)."""
    return all(w._thread is None for w in (tab.worker, tab.search.branch_worker, tab.search.base_worker))


def decode(qtbot, window, text=TEXT, mode="greedy", width=3):
    tab = window.translate_tab
    tab.sampling_combo.setCurrentIndex({"greedy": 0, "beam": 2}[mode])
    tab.sampling_row.beam_spin.setValue(width)
    translate(qtbot, window, text)
    qtbot.waitUntil(lambda: idle(tab), timeout=20000)
    tab.search.panel.tree_view.repaint()
    return tab


def shown(tab):
    """The translation (tokens and every attention map) that the tab's views show."""
    return tab.document.translation(-1)


def test_a_beam_decode_shows_the_engines_tree(qtbot, loaded):
    tab = decode(qtbot, loaded, mode="beam", width=3)
    events = list(loaded.translator.beam_steps(TEXT, DecodeConfig(beam=3, max_len=tab.playback.max_len_spin.value())))
    engine = {n.id: n.status for e in events if isinstance(e, BeamStep) for n in e.nodes}
    tree = tab.document.tree
    assert {i: n.status for i, n in tree.nodes.items()} == engine
    assert set(tab.search.panel.tree_view.node_ids()) == set(engine)
    assert tree.ranking == next(e for e in events if isinstance(e, BeamDone)).ranking
    assert {"pruned", "finished"} <= set(engine.values())
    # the chosen hypothesis is what the tab shows, and the n-best list ranks the finished ones
    assert tab.output_view.tokens() == [s.token for s in tree.path(tree.chosen)]
    assert tab.search.panel.nbest.rowCount() == min(3, len(tree.ranking))
    assert tab.search.panel.tree_view.selected == tree.chosen
    assert tab.search.side.currentWidget() is tab.search.panel_scroll
    assert "finished, on the chosen translation" in tab.search.panel.tree_view.accessible_value()


def test_clicking_a_node_shows_exactly_that_hypothesis(qtbot, loaded):
    tab = decode(qtbot, loaded, mode="beam", width=3)
    tree, view = tab.document.tree, tab.search.panel.tree_view
    node = max((n for n in tree.nodes.values() if n.status == "pruned" and n.step.index >= 1),
               key=lambda n: n.step.index)
    view.parentWidget().parentWidget().ensureVisible(view.node_rect(node.id).center().x(),
                                                     view.node_rect(node.id).center().y())
    qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=view.node_rect(node.id).center())
    expected = tree.translation(node.id, loaded.translator.detokenize)
    views = shown(tab)
    assert views.tokens == expected.tokens and set(views.attention) == set(expected.attention)
    for kind, maps in expected.attention.items():  # every kind, layer and head
        np.testing.assert_array_equal(views.attention[kind], maps)
    panel = tab.attention
    layer, head = panel.layer, panel.head
    big = panel.heatmap.data().matrix
    np.testing.assert_allclose(big, expected.attention[panel.kind][layer].mean(0) if head is None else
                               expected.attention[panel.kind][layer, head], atol=1e-6)
    assert tab.topk_view._items == list(node.step.topk)  # its top-k at that step, its token chosen
    assert tab.topk_view._chosen == (node.step.token, node.step.probability)
    assert view.selected == node.id and "pruned" in view.describe(node.id)
    # the keyboard: Left moves to the parent, Enter shows it
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_Left)
    assert view.cursor_node == node.parent
    qtbot.keyClick(view, Qt.Key.Key_Return)
    assert tab.output_view.tokens() == [s.token for s in tree.path(node.parent)]


def test_a_what_if_branch_from_the_top_k_chart(qtbot, loaded):
    tab = decode(qtbot, loaded)
    first = [s.token for s in tab.document.steps]
    tab.go_to(1)
    tab.topk_view.repaint()
    alternative = tab.topk_view._items[1][0]
    assert alternative != first[1]
    row = tab.topk_view._rows[1]
    qtbot.mouseDClick(tab.topk_view, Qt.MouseButton.LeftButton, pos=row.center())
    tree = tab.document.tree
    qtbot.waitUntil(lambda: tree.branches == 1 and idle(tab), timeout=20000)
    qtbot.waitUntil(lambda: tab.search.panel.tree_view.selected is not None and
                    tree.nodes[tab.search.panel.tree_view.selected].branch == 1, timeout=5000)
    branch = sorted((n for n in tree.nodes.values() if n.branch == 1), key=lambda n: n.id)
    assert branch[0].step.token == alternative and branch[0].step.index == 1
    assert branch[0].parent == tab.document.shown[0] and tree.nodes[branch[0].parent].step.token == first[0]
    assert tab.output_view.tokens()[:2] == [first[0], alternative]  # the branch is shown, with its attention
    assert len(shown(tab).tokens) == len(branch) + 1
    assert [n.step.token for n in tree.nodes.values() if n.branch == 0] == first  # the old path stays beside it
    labels = [tab.search.panel.nbest.item(r, 0).text() for r in range(tab.search.panel.nbest.rowCount())]
    assert labels == ["1", "what-if 1"]


def test_a_what_if_in_beam_mode_is_a_beam_search_grafted_on_the_tree(qtbot, loaded):
    tab = decode(qtbot, loaded, mode="beam", width=3)
    tree, search = tab.document.tree, tab.search
    first = [s.token for s in tab.document.steps]
    tab.go_to(1)
    alternative = next(tok for tok, _ in tab.document.steps[1].topk if tok != first[1])
    search.what_if(alternative)
    qtbot.waitUntil(lambda: tree.branches == 1 and idle(tab), timeout=20000)
    qtbot.waitUntil(lambda: 1 in tab.document.branch_ends, timeout=5000)
    forced = [loaded.translator.tgt_vocab.id(t) for t in (first[0], alternative)]
    events = list(loaded.translator.beam_steps(TEXT, tab.document.request.decode, forced=forced))
    engine = {n.id: n for e in events[1:-1] for n in e.nodes}
    want, node_id = [], events[-1].ranking[0]
    while node_id != -1:
        want.insert(0, engine[node_id].step.token)
        node_id = engine[node_id].parent
    assert tab.output_view.tokens() == want  # the branch's best hypothesis is shown
    branch = [n for n in tree.nodes.values() if n.branch == 1]
    assert len(branch) == sum(1 for n in engine.values() if n.step.index >= 1)  # every candidate after the prefix
    assert {n.status for n in branch} >= {"finished"} and len({n.step.index for n in branch}) < len(branch)
    rows = search.panel.tree_view._pos
    assert min(rows[n.id][1] for n in branch) > max(rows[n.id][1] for n in tree.nodes.values() if not n.branch)
    labels = [search.panel.nbest.item(r, 0).text() for r in range(search.panel.nbest.rowCount())]
    assert labels[-1] == "what-if 1"


def test_what_if_input_is_checked_with_a_message(qtbot, loaded):
    tab = decode(qtbot, loaded)
    panel = tab.search.panel
    panel.token_edit.setText("no-such-token")
    qtbot.mouseClick(panel.what_if_button, Qt.MouseButton.LeftButton)
    assert "not in the model's output vocabulary" in tab.message.messages()[0]
    panel.prefix_edit.setText("zz-unknown")
    qtbot.mouseClick(panel.prefix_button, Qt.MouseButton.LeftButton)
    assert "Not in the model's output vocabulary" in tab.message.messages()[0]
    assert tab.document.tree.branches == 0
    prefix = tab.document.steps[0].topk[1][0]
    panel.prefix_edit.setText(prefix)
    qtbot.mouseClick(panel.prefix_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tab.document.tree.branches == 1 and idle(tab),
                    timeout=20000)
    qtbot.waitUntil(lambda: tab.output_view.tokens()[:1] == [prefix], timeout=5000)
    start = min((n for n in tab.document.tree.nodes.values() if n.branch == 1), key=lambda n: n.id)
    assert start.parent == ROOT and start.step.forced


def test_switching_heads_off_redecodes_and_marks_the_changes(qtbot, loaded):
    tab = decode(qtbot, loaded)
    translator, grid = loaded.translator, tab.attention.grid
    tab.attention.select(kind="cross")
    grid.repaint()
    before = [s.token for s in tab.document.steps if s.token != "<eos>"]
    layers, heads = grid.shape()
    for layer in range(layers):  # Ctrl+click every layer's label: no cross-attention at all
        qtbot.mouseClick(grid, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier,
                         grid.layer_label_rect(layer).center())
        qtbot.waitUntil(lambda: idle(tab), timeout=20000)
    off = tuple(HeadRef("cross", la, h) for la in range(layers) for h in range(heads))
    assert tab.document.request.decode.heads_off == off and not tab.document.request.decode.rescale_heads
    expected = translator.translate(TEXT, DecodeConfig(heads_off=off, max_len=tab.playback.max_len_spin.value()))
    after = [t for t in expected.tokens if t != "<eos>"]
    heads_panel = tab.search.heads_panel
    assert heads_panel.before_tokens == before and heads_panel.after_tokens == after
    assert heads_panel.changed == changed_tokens(before, after) and heads_panel.changed != (set(), set())
    assert heads_panel.after_text.toPlainText() == " ".join(
        f"[{t}]" if i in heads_panel.changed[1] else t for i, t in enumerate(after))
    assert heads_panel.off_edit.text() == ",".join(f"cross:{la + 1}.*" for la in range(layers))
    assert not np.any(shown(tab).attention["cross"])  # an off head's map is all zeros
    assert grid.off == {(la, h) for la in range(layers) for h in range(heads)}
    assert tab.search.side.currentWidget() is tab.search.heads_scroll
    # the other normalisation, offered as an option; then everything on again
    heads_panel.rescale_check.setChecked(True)
    qtbot.waitUntil(lambda: idle(tab) and tab.document.request.decode.rescale_heads, timeout=20000)
    qtbot.mouseClick(heads_panel.reset_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: idle(tab) and not tab.document.request.decode.heads_off, timeout=20000)
    assert [s.token for s in tab.document.steps if s.token != "<eos>"] == before and not grid.off


def test_a_head_toggles_from_the_keyboard_and_with_ctrl_click(qtbot, loaded):
    tab = decode(qtbot, loaded, mode="beam", width=2)
    grid = tab.attention.grid
    kind = tab.attention.kind
    grid.repaint()
    qtbot.mouseClick(grid, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier,
                     grid.tile_rect(0, 1).center())
    qtbot.waitUntil(lambda: idle(tab) and bool(tab.document.request.decode.heads_off), timeout=20000)
    assert tab.document.request.decode.heads_off == (HeadRef(kind, 0, 1),) and tab.document.request.decode.beam == 2
    assert tab.document.tree.ranking  # the beam search ran again with the head off
    grid.setFocus()
    next_head = Qt.Key.Key_Down if grid.transposed else Qt.Key.Key_Right  # a turned grid has a row per head
    qtbot.keyClick(grid, next_head)  # the cursor starts at layer 1, head 1
    qtbot.keyClick(grid, next_head)
    qtbot.keyClick(grid, Qt.Key.Key_Space)  # layer 1, head 2 on again
    qtbot.waitUntil(lambda: idle(tab) and not tab.document.request.decode.heads_off, timeout=20000)
    assert "switched off" not in grid.accessible_value()


def test_changed_tokens_align_the_two_translations():
    assert changed_tokens("a b c d".split(), "a x c d".split()) == ({1}, {1})
    assert changed_tokens("a b c".split(), "a b c".split()) == (set(), set())
    assert changed_tokens("a b c".split(), "z a b c".split()) == (set(), {0})  # an insertion shifts nothing else
    assert marked_html(["a", "<b>"], {1}).endswith("[&lt;b&gt;]</span>")


def test_the_decoding_mode_is_remembered(qtbot, loaded, settings):
    tab = loaded.translate_tab
    tab.sampling_combo.setCurrentIndex(2)
    tab.sampling_row.beam_spin.setValue(7)
    tab.sampling_row.penalty_spin.setValue(0.6)
    tab.save_settings(settings)
    tab.sampling_combo.setCurrentIndex(0)
    tab.restore_settings(settings)
    assert tab.sampling_row.mode == "beam" and tab.sampling_row.beam_spin.value() == 7
    assert abs(tab.sampling_row.penalty_spin.value() - 0.6) < 1e-9
    assert tab._decode_config().beam == 7


def test_the_tree_page_makes_room_on_a_short_screen_and_the_split_is_remembered(qtbot, loaded, settings):
    from attnviz.gui.main_window import MainWindow

    loaded.resize(1024, 700)
    tab = decode(qtbot, loaded, mode="greedy")
    tab.search.side.setCurrentIndex(0)
    side = tab.side_splitter  # the token strips, the top-k chart, the pages
    side.setSizes([10_000, 10_000, 0])  # the pages squeezed to their minimum
    side.splitterMoved.emit(side.sizes()[0], 1)  # as when the user drags a handle
    before = side.sizes()
    assert not tab.layout_state.automatic and before[2] < tab.search.page_need()
    tab.search.side.setCurrentWidget(tab.search.panel_scroll)
    qtbot.waitUntil(lambda: not tab.layout_state._refit.isActive()
                    and not tab.search.panel_scroll.verticalScrollBar().isVisible(), timeout=5000)
    after = side.sizes()
    needs = tab.layout_state.needs()
    assert after[2] > before[2] and after[2] >= needs.page == tab.search.page_need()  # the page got its rows
    assert after[1] >= needs.chart_least and after[0] >= min(needs.floors(sum(after))[0], needs.strips)  # kept theirs
    tab.save_settings(settings)
    again = MainWindow(settings)
    qtbot.addWidget(again)
    again.resize(1024, 700)
    again.show()
    side = again.translate_tab.side_splitter  # (an empty tab's needs differ by a few px; laid out in a moment)
    try:
        qtbot.waitUntil(lambda: all(abs(r - a) <= 40 for r, a in zip(side.sizes(), after)), timeout=5000)
    except QtTimeout as timeout:  # say where it stopped
        raise AssertionError((side.sizes(), after, again.translate_tab.layout_state.needs())) from timeout
    assert not again.translate_tab.layout_state.automatic and side.sizes() != before
