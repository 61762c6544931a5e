"""DecodeDocument (Qt-free): one decode in one place. Every step kept, views cut at a step, rows and columns for
hovering; the search tree grown from the events; listeners told each change, in order, with what changed; a reset."""

import subprocess
import sys

import numpy as np
import pytest

from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import BeamStep, DecodeStep, EncoderPass
from attnviz.engine.search.tree import SearchTree
from attnviz.session.translate.changes import (
    Cleared,
    Encoded,
    Finished,
    PathShown,
    SearchRanked,
    StepAdded,
    StepShown,
    TreeGrew,
)
from attnviz.session.translate.document import DecodeDocument, DecodeRequest, Hypothesis

TEXT = "q1 q2 q3 q4"


def document_of(translator, text, beam=0, listener=None):
    """A document fed a whole decode of ``text`` (greedy, or a beam of width ``beam``), then finished."""
    doc = DecodeDocument()
    if listener is not None:
        doc.subscribe(listener)
    decode = DecodeConfig(beam=beam) if beam else DecodeConfig()
    doc.start(DecodeRequest(text, decode, bool(beam)), translator.detokenize)
    for event in (translator.beam_steps(text, decode) if beam else translator.steps(text, decode)):
        doc.add(event)
    doc.finish()
    return doc


def outline(tree):
    """A tree's nodes without their attention arrays (two decodes give equal arrays, which == cannot compare)."""
    return {i: (n.parent, n.step.token, n.status, n.score) for i, n in tree.nodes.items()}


def test_views_are_cut_at_the_step(trained_translator):
    s = document_of(trained_translator, "q1 q2 q3")
    assert s.kinds() == ["encoder", "decoder", "cross"] and len(s.steps) == 4
    matrix, rows, cols, highlight = s.heatmap("cross", 1, None, 1)
    assert matrix.shape == (2, 5) and rows == ("w3", "w2") and cols[0] == "<sos>" and highlight == 1
    np.testing.assert_allclose(matrix, s.maps("cross", 1)[1].mean(axis=0))
    matrix, rows, cols, highlight = s.heatmap("decoder", 0, 2, 2)
    assert matrix.shape == (3, 3) and cols == ("<sos>", "w3", "w2") and np.all(np.triu(matrix, 1) == 0)
    assert s.heatmap("encoder", 1, 0, 0)[3] is None and s.heatmap("encoder", 1, 0, 0)[0].shape == (5, 5)
    assert s.head_layout() == {"encoder": (2, 4), "decoder": (2, 4), "cross": (2, 4)}


def test_rows_and_columns_for_hover(trained_translator):
    s = document_of(trained_translator, "q1 q2 q3")
    row = s.cross_row(2, 1, 3)
    np.testing.assert_allclose(row, s.steps[2].cross_attention[1, 3])
    column = s.cross_column(1, 3, 0, None)
    np.testing.assert_allclose(column, s.maps("cross", 3)[0].mean(axis=0)[:, 1])
    assert s.cross_row(9, 0, None) is None and s.cross_column(99, 3, 0, None) is None


def test_full_translation_equals_the_engine(trained_translator):
    s = document_of(trained_translator, "q4 q5")
    t = trained_translator.translate("q4 q5")
    assert s.translation(-1).text == t.text and s.text() == t.text
    for kind in t.attention:
        np.testing.assert_array_equal(s.translation(-1).attention[kind], t.attention[kind])


def test_a_greedy_decode_tells_its_listeners_each_change_in_order(trained_translator):
    told = []
    doc = document_of(trained_translator, TEXT, listener=told.append)
    events = list(trained_translator.steps(TEXT))
    steps = [e for e in events if isinstance(e, DecodeStep)]
    assert told == [Cleared(), told[1], *[StepAdded(i) for i in range(len(steps))], Finished()]
    assert isinstance(told[1], Encoded) and told[1].encoder is doc.encoder and doc.src_tokens == events[0].src_tokens
    assert [(s.token, s.probability) for s in doc.steps] == [(s.token, s.probability) for s in steps]
    assert doc.shown == list(range(len(steps))) and doc.finished
    assert doc.tree.path(doc.tree.tip) == doc.steps and doc.node == doc.tree.tip
    assert doc.current == -1  # which step is shown is the views' choice: nothing moved it
    doc.go_to(99)
    doc.go_to(1)
    assert told[-2:] == [StepShown(len(steps) - 1), StepShown(1)] and doc.current == 1
    assert [h.label for h in doc.hypotheses()] == ["1"] and doc.hypotheses()[0].node.id == doc.tree.tip


def test_a_beam_decode_grows_the_tree_and_ranks_it(trained_translator):
    told = []
    doc = document_of(trained_translator, TEXT, beam=3, listener=told.append)
    events = list(trained_translator.beam_steps(TEXT, DecodeConfig(beam=3)))
    beam_steps = [e for e in events if isinstance(e, BeamStep)]
    tree = SearchTree.from_events(events)
    assert told == [Cleared(), told[1], *[TreeGrew(tuple(n.id for n in e.nodes), 0) for e in beam_steps],
                    SearchRanked(tree.chosen), Finished()]
    assert isinstance(told[1], Encoded) and told[1].encoder is doc.encoder
    assert outline(doc.tree) == outline(tree) and doc.steps == []  # nothing is shown until a node is chosen
    doc.show_node(tree.chosen)
    assert told[-1] == PathShown(tree.chosen) and doc.steps == doc.tree.path(tree.chosen)
    assert doc.current == len(doc.steps) - 1 and doc.node == tree.chosen and doc.finished
    expected = tree.translation(tree.chosen, trained_translator.detokenize)
    assert doc.translation(-1).tokens == expected.tokens
    rows = doc.hypotheses()
    assert [h.label for h in rows] == ["1", "2", "3"][:len(tree.ranking)]
    assert rows[0] == Hypothesis("1", doc.tree.nodes[tree.chosen], expected.text)


def test_a_change_made_by_a_listener_is_told_after_the_current_one_reached_everyone(trained_translator):
    doc, told = DecodeDocument(), []

    def scrubber(change):  # moves to each new step, as the playback bar does with Instant on
        told.append(("scrubber", change))
        if isinstance(change, StepAdded):
            doc.go_to(change.index)

    doc.subscribe(scrubber)
    doc.subscribe(lambda change: told.append(("view", change)))
    doc.start(DecodeRequest("q1", DecodeConfig(), False), trained_translator.detokenize)
    events = iter(trained_translator.steps("q1"))
    doc.add(next(events))
    doc.add(next(events))
    assert [type(c) for who, c in told if who == "view"] == [Cleared, Encoded, StepAdded, StepShown]
    assert [c for who, c in told if who == "view"][2:] == [StepAdded(0), StepShown(0)]
    assert [who for who, _ in told[-4:]] == ["scrubber", "view", "scrubber", "view"]


def test_a_what_if_branch_hangs_on_the_tree_and_ends_in_the_n_best_list(trained_translator):
    told = []
    doc = document_of(trained_translator, TEXT, listener=told.append)
    first, tip = doc.steps[0], doc.tree.tip
    alternative = next(tok for tok, _ in doc.steps[1].topk if tok != doc.steps[1].token)
    forced = doc.tree.forced_ids(doc.shown[1], trained_translator.tgt_vocab.id(alternative))
    branch = doc.begin_branch(doc.shown[0])
    for event in trained_translator.steps(TEXT, forced=forced):
        doc.add_branch(event)  # its encoder pass and repeated first step add nothing
    grew = [c for c in told if isinstance(c, TreeGrew)]
    assert branch == 1 and grew and all(c.branch == 1 and len(c.nodes) == 1 for c in grew)
    number, end = doc.end_branch()
    assert number == 1 and doc.tree.nodes[end].branch == 1 and doc.tree.tip == tip
    assert [s.token for s in doc.tree.path(end)][:2] == [first.token, alternative]
    assert [h.label for h in doc.hypotheses()] == ["1", "what-if 1"] and doc.end_branch() is None


def test_a_reset_empties_the_document(trained_translator):
    told = []
    doc = document_of(trained_translator, TEXT, listener=told.append)
    doc.reset()
    assert told[-1] == Cleared()
    assert doc.request is None and doc.tree is None and doc.encoder is None and doc.steps == [] and doc.shown == []
    assert doc.current == -1 and not doc.finished and doc.kinds() == [] and doc.hypotheses() == []
    assert doc.maps("cross", -1) is None and doc.cross_column(0, -1, 0, None) is None
    doc.go_to(3)
    doc.finish()  # nothing was asked: nothing finishes
    doc.add(next(iter(trained_translator.steps(TEXT))))  # an old decode's late event is dropped
    assert told[-1] == Cleared() and doc.tree is None
    with pytest.raises(ValueError):
        doc.translation(-1)


def test_the_document_imports_neither_qt_nor_torch():
    code = ("import sys, attnviz.session.translate.document; "
            "print(sorted(m for m in ('PySide6', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_encoder_pass_starts_the_tree(trained_translator):
    doc = DecodeDocument()
    doc.start(DecodeRequest("q1", DecodeConfig(), False), trained_translator.detokenize)
    encoder = next(iter(trained_translator.steps("q1")))
    assert isinstance(encoder, EncoderPass)
    doc.add(encoder)
    assert doc.tree is not None and doc.encoder is encoder and doc.src_tokens == encoder.src_tokens
    assert doc.kinds() == ["encoder"] and doc.head_layout() == {"encoder": (2, 4)}
