"""Beam search as events (engine.search.beam.beam_steps) and the search tree built from them, over every kind."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnviz.engine.config import DecodeConfig
from attnviz.engine.corpus.batching import pad_batch
from attnviz.engine.events import BeamDone, BeamStep, DecodeStep, EncoderPass
from attnviz.engine.kinds import all_kinds
from attnviz.engine.search.rules import Candidate, prune
from attnviz.engine.search.torch_batch import beam_batch
from attnviz.engine.search.tree import ROOT, SearchTree
from attnviz.engine.text.vocab import EOS_ID
from tests.helpers import capture_atol, make_toy_lm, make_toy_translator, train_toy

SOURCE_KINDS = [k.name for k in all_kinds() if k.has_source and k.name != "marian"]
TEXT = "q1 q2 q3 q4"


@pytest.fixture(scope="module", params=SOURCE_KINDS)
def trained(request):
    translator = make_toy_translator(seed=3, kind=request.param)
    train_toy(translator, steps=150)
    return translator


def search(translator, text: str = TEXT, **decode) -> SearchTree:
    events = list(translator.beam_steps(text, DecodeConfig(**decode)))
    assert isinstance(events[0], EncoderPass) and isinstance(events[-1], BeamDone)
    assert all(isinstance(e, BeamStep) for e in events[1:-1])
    tree = SearchTree(events[0])
    for event in events[1:]:
        tree.add(event)
    return tree


def test_beam_width_one_is_greedy(trained):
    greedy = trained.translate(TEXT)
    tree = search(trained, beam=1)
    chosen = tree.translation(tree.chosen, trained.detokenize)
    assert chosen.tokens == greedy.tokens
    for kind, maps in greedy.attention.items():
        np.testing.assert_allclose(chosen.attention[kind], maps, atol=capture_atol(trained.kind.name))


@pytest.mark.parametrize("beam", [2, 5])
def test_beam_events_agree_with_the_batched_search(trained, beam):
    texts = [TEXT, "q5 q0", "q7 q8 q9 q10 q11 q3"]
    batched = trained.translate_batch_tokens(texts, DecodeConfig(beam=beam))
    for text, tokens in zip(texts, batched):
        tree = search(trained, text, beam=beam)
        assert [s.token for s in tree.path(tree.chosen) if s.token_id != EOS_ID] == tokens


def test_scores_are_the_sums_of_the_tokens_log_probabilities(trained):
    tree = search(trained, beam=4)
    assert {n.status for n in tree.nodes.values()} >= {"alive", "finished"}
    for node in tree.nodes.values():
        assert node.score == pytest.approx(sum(math.log(s.probability) for s in tree.path(node.id)), abs=1e-4)
        if node.status == "finished":
            length = len(tree.path(node.id))
            assert node.normalised == pytest.approx(node.score / ((5 + length) / 6), rel=1e-6)
    ranked = [tree.nodes[i].normalised for i in tree.ranking]
    assert ranked == sorted(ranked, reverse=True) and len(ranked) >= 1


def test_each_step_keeps_at_most_the_beam_and_pruned_candidates_rank_below_the_kept(trained):
    events = list(trained.beam_steps(TEXT, DecodeConfig(beam=3)))
    for event in events[1:-1]:
        assert len(event.alive) <= 3 and [n.step.index for n in event.nodes] == [event.index] * len(event.nodes)
        kept = [n.score for n in event.nodes if n.status == "alive"]
        for pruned in (n for n in event.nodes if n.status == "pruned" and n.step.token_id != EOS_ID):
            assert pruned.score <= min(kept) + 1e-6


def test_the_chosen_hypothesis_attention_equals_a_teacher_forced_pass(trained):
    tree = search(trained, beam=5)
    ids = [s.token_id for s in tree.path(tree.chosen)]
    replay = [e for e in trained.steps(TEXT, DecodeConfig(max_len=len(ids)), forced=ids) if isinstance(e, DecodeStep)]
    assert [s.token_id for s in replay] == ids and all(s.forced for s in replay)
    for captured, again in zip(tree.path(tree.chosen), replay):
        assert captured.probability == pytest.approx(again.probability, abs=1e-5)
        for name in ("self_attention", "cross_attention"):
            a, b = getattr(captured, name), getattr(again, name)
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_allclose(a, b, atol=capture_atol(trained.kind.name))


def test_pruned_and_what_if_nodes_give_whole_translations(trained):
    tree = search(trained, beam=3)
    pruned = next(n for n in tree.nodes.values() if n.status == "pruned")
    t = tree.translation(pruned.id, trained.detokenize)
    assert t.tokens[-1] == pruned.step.token and len(t.tokens) == pruned.step.index + 1
    # what if the first token had been the second candidate of its step?
    first = tree.path(tree.chosen)[0]
    first_node = next(n for n in tree.nodes.values() if n.step is first)
    other = next(tok for tok, _ in first.topk if tok != first.token)
    forced = tree.forced_ids(first_node.id, trained.tgt_vocab.id(other))
    steps = [e for e in trained.steps(TEXT, forced=forced) if isinstance(e, DecodeStep)]
    ids = tree.add_branch(steps, first_node.parent)
    branch = [tree.nodes[i] for i in ids]
    assert branch[0].step.token == other and branch[0].step.forced and branch[0].branch == 1
    assert branch[0].parent == ROOT and tree.path(ids[-1]) == steps
    assert branch[-1].score == pytest.approx(sum(math.log(s.probability) for s in steps), abs=1e-4)


def test_a_typed_prefix_is_forced_and_unknown_words_are_refused(trained):
    ids = trained.target_ids("w3 w1")
    steps = [e for e in trained.steps(TEXT, forced=ids) if isinstance(e, DecodeStep)]
    assert [s.token for s in steps[:2]] == ["w3", "w1"] and [s.forced for s in steps[:3]] == [True, True, False]
    with pytest.raises(ValueError, match="Not in the model's output vocabulary: zebra"):
        trained.target_ids("w3 zebra")


def test_a_language_model_beam_continues_its_prefix():
    lm = make_toy_lm(seed=2)
    tree = search(lm, "abc", beam=3, max_len=8)
    path = tree.path(tree.chosen)
    assert [s.token for s in path[:3]] == ["a", "b", "c"] and all(s.forced for s in path[:3])
    assert not any(s.forced for s in path[3:])


def test_prune_keeps_the_beam_and_counts_endings_among_the_beam_best():
    cands = [Candidate(-0.1, 0, 7), Candidate(-0.2, 0, EOS_ID), Candidate(-0.3, 1, 8), Candidate(-0.4, 1, EOS_ID),
             Candidate(-0.5, 0, 9)]
    split = prune(cands, beam=2, last=False)
    assert split.kept == [cands[0], cands[2]] and split.ended == [cands[1]] and split.dropped == [cands[3], cands[4]]
    last = prune(cands, beam=2, last=True)
    assert last.kept == [] and last.ended == cands[:2] and last.dropped == cands[2:]


def test_beam_batch_pads_finished_sentences_without_changing_others():
    translator = make_toy_translator(seed=5)
    train_toy(translator, steps=100)
    src = pad_batch([translator.prepare_source(t)[1] for t in (TEXT, "q1")])
    together = beam_batch(translator.model, src, DecodeConfig(beam=3))
    alone = [beam_batch(translator.model, src[i:i + 1, : (src[i] != 0).sum()], DecodeConfig(beam=3))[0]
             for i in range(2)]
    assert together == alone


def test_a_beam_what_if_branch_is_grafted_under_its_parent(trained):
    tree = search(trained, beam=3)
    chosen = tree.path(tree.chosen)
    node = next(n for n in tree.nodes.values() if n.step is chosen[1])  # the chosen path's second token
    other = next(tok for tok, _ in node.step.topk if tok != node.step.token)
    forced = tree.forced_ids(node.id, trained.tgt_vocab.id(other))
    events = list(trained.beam_steps(TEXT, DecodeConfig(beam=3), forced=forced))
    graft, before = tree.graft(node.parent), set(tree.nodes)
    added = [i for e in events[1:] for i in graft.add(e)]
    assert set(added) == set(tree.nodes) - before and all(tree.nodes[i].branch == 1 for i in added)
    first = [tree.nodes[i] for i in added if tree.nodes[i].step.index == 1]
    assert len(first) == 1 and first[0].step.token == other and first[0].parent == node.parent and first[0].step.forced
    engine = {n.id: n for e in events[1:-1] for n in e.nodes}
    best = graft.ranking[0]
    assert tree.path(best)[0] is chosen[0]  # the shared prefix is the tree's own node
    want, node_id = [], events[-1].ranking[0]
    while node_id != -1:
        want.insert(0, engine[node_id].step.token)
        node_id = engine[node_id].parent
    assert [s.token for s in tree.path(best)][1:] == want[1:] and tree.nodes[best].status == "finished"
