"""The one place that turns a decode's events into a search tree and its answer (``SearchTree.from_events``,
``SearchTree.add``, ``SearchTree.answer``), checked against the engine's own events and translations."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import BeamDone, BeamStep, DecodeStep, EncoderPass
from attnviz.engine.search.tree import ROOT, SearchTree
from attnviz.engine.text.vocab import EOS

TEXT = "q1 q2 q3 q4"


def test_a_beam_decode_becomes_its_tree_and_answer(trained_translator):
    decode = DecodeConfig(beam=3)
    events = list(trained_translator.beam_steps(TEXT, decode))
    tree = SearchTree.from_events(events)
    nodes = {n.id: n for e in events if isinstance(e, BeamStep) for n in e.nodes}
    assert tree.encoder is events[0] and tree.nodes == nodes
    assert tree.ranking == events[-1].ranking and tree.chosen == events[-1].ranking[0]
    answer = tree.answer(trained_translator.detokenize)
    expected = tree.translation(tree.chosen, trained_translator.detokenize)
    assert answer.tokens == expected.tokens and answer.text == expected.text
    printed = trained_translator.translate_batch_tokens([TEXT], decode)[0]  # the batched search agrees
    assert [t for t in answer.tokens if t != EOS] == printed
    for kind, maps in expected.attention.items():
        np.testing.assert_array_equal(answer.attention[kind], maps)


def test_a_greedy_decode_is_a_path_whose_end_is_the_answer(trained_translator):
    events = list(trained_translator.steps(TEXT))
    tree = SearchTree.from_events(events)
    steps = [e for e in events if isinstance(e, DecodeStep)]
    assert tree.path(tree.tip) == steps and tree.ranking == (tree.tip,)
    assert tree.path_ids(tree.tip) == list(range(len(steps))) and tree.path_ids(ROOT) == []
    assert [n.branch for n in tree.nodes.values()] == [0] * len(steps)
    answer, engine = tree.answer(trained_translator.detokenize), trained_translator.translate(TEXT)
    assert answer.tokens == engine.tokens and answer.text == engine.text
    for kind, maps in engine.attention.items():
        np.testing.assert_allclose(answer.attention[kind], maps, atol=1e-6)


def test_events_fed_one_at_a_time_grow_the_same_tree_and_follow_the_leader(trained_translator):
    events = list(trained_translator.beam_steps(TEXT, DecodeConfig(beam=3)))
    tree = SearchTree(events[0])
    assert tree.leader == ROOT and tree.chosen is None and tree.answer(trained_translator.detokenize) is None
    for event in events[1:-1]:
        assert tree.add(event) == [n.id for n in event.nodes]
        if event.alive:
            assert tree.leader == max(event.alive, key=lambda n: n.score).id
        assert tree.ranking == ()  # nothing is chosen before the search ends
    assert tree.add(events[-1]) == [] and tree.ranking == events[-1].ranking
    assert tree.nodes == SearchTree.from_events(events).nodes


def test_a_greedy_step_extends_the_main_path_and_a_what_if_branch_stays_beside_it(trained_translator):
    events = list(trained_translator.steps(TEXT))
    tree = SearchTree(events[0])
    ids = [tree.add(e) for e in events[1:]]
    assert [i for added in ids for i in added] == list(range(len(events) - 1)) and tree.tip == len(events) - 2
    branch = tree.add_branch(events[1:], 0)  # a branch under the first node (its repeated first step is skipped)
    assert tree.tip == len(events) - 2 and tree.ranking == (tree.tip,)  # the main path keeps the answer
    assert branch and all(tree.nodes[i].branch == 1 for i in branch)


@pytest.mark.parametrize("events", [[], [BeamDone(())]])
def test_events_must_start_with_the_encoder_pass(events):
    with pytest.raises(ValueError, match="EncoderPass"):
        SearchTree.from_events(events)


def test_one_decode_has_one_encoder_pass(trained_translator):
    encoder = next(iter(trained_translator.steps(TEXT)))
    assert isinstance(encoder, EncoderPass)
    with pytest.raises(ValueError, match="one EncoderPass"):
        SearchTree.from_events([encoder, encoder])
