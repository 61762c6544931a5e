"""Alignments from cross-attention: rows and shift, subword merging, Pharaoh, AER on hand-made gold sets."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine.analysis.alignment import (
    AlignmentReady,
    aer,
    align_steps,
    format_pharaoh,
    link_matrix,
    merge_pieces,
    parse_pharaoh,
    to_links,
    word_rows,
)
from attnviz.engine.errors import InputError
from tests.helpers import make_toy_translator


def test_aer_on_hand_made_gold_sets():
    assert aer([{(0, 0), (1, 1), (2, 1)}], [{(0, 0), (1, 1)}], [{(2, 1)}]) == pytest.approx(0.0)
    assert aer([{(0, 1)}], [{(0, 0)}], [set()]) == pytest.approx(1.0)
    assert aer([{(0, 0), (1, 0)}], [{(0, 0), (1, 1)}], [{(1, 0)}]) == pytest.approx(0.25)
    # corpus level: (1 + 2) + (0 + 0) matches over (2 + 2) + (1 + 1) links
    two = aer([{(0, 0), (1, 0)}, {(0, 1)}], [{(0, 0), (1, 1)}, {(0, 0)}], [{(1, 0)}, set()])
    assert two == pytest.approx(1 - 3 / 6)


def test_parse_and_format_pharaoh():
    sure, possible = parse_pharaoh("0-0 1?2 3-4-P 5-6-S")
    assert sure == {(0, 0), (5, 6)}
    assert possible == {(0, 0), (1, 2), (3, 4), (5, 6)}
    assert format_pharaoh({(2, 0), (0, 1), (0, 0)}) == "0-0 0-1 2-0"
    with pytest.raises(ValueError):
        parse_pharaoh("0-1-2-3")


def test_word_rows_drop_specials_and_shift():
    cross = np.zeros((3, 4))  # decoder inputs <sos> y0 y1 (n = 2) x source <sos> x0 x1 <eos> (m = 2)
    cross[0] = [0.5, 0.25, 0.25, 0.0]  # predicts y0
    cross[1] = [0.0, 0.0, 0.5, 0.5]  # predicts y1 (input y0)
    cross[2] = [0.0, 0.9, 0.1, 0.0]  # predicts <eos> (input y1)
    assert np.allclose(word_rows(cross), [[0.5, 0.5], [0.0, 1.0]])
    assert np.allclose(word_rows(cross, shift=True), [[0.0, 1.0], [0.9, 0.1]])


def test_links_argmax_and_threshold():
    rows = np.array([[0.7, 0.2, 0.1], [0.1, 0.45, 0.45], [0.3, 0.3, 0.4]])  # [n = 3, m = 3]
    assert to_links(link_matrix(rows)) == {(0, 0), (1, 1), (2, 2)}  # ties: the first
    assert to_links(link_matrix(rows, threshold=0.4)) == {(0, 0), (1, 1), (2, 1), (2, 2)}


def test_merge_pieces_on_a_word_boundary_mask():
    # target pieces: "dog@@ s", "bark" -> 2 words; source pieces: "Hund@@ e", "bell@@ en" -> 2 words
    matrix = np.array([[0.6, 0.2, 0.1, 0.1],
                       [0.4, 0.4, 0.1, 0.1],
                       [0.0, 0.0, 0.5, 0.5]])  # [Tp = 3, Sp = 4]
    words = merge_pieces(matrix, [True, False, True], [True, False, True, False])
    assert np.allclose(words, [[0.8, 0.2], [0.0, 1.0]])
    assert np.allclose(words.sum(-1), 1.0)
    stacked = merge_pieces(np.stack([matrix, matrix]), [True, False, True], [True, False, True, False])
    assert stacked.shape == (2, 2, 2)


def test_align_tiny_model_against_its_own_links():
    translator = make_toy_translator(seed=0)
    sources, targets = ["q1 q2 q3", "q4 q5", "q6"], ["w3 w2 w1", "w5 w4", "w6"]
    result = list(align_steps(translator, sources, targets, layer=1, head=2, batch_size=2))[-1]
    assert isinstance(result, AlignmentReady) and len(result.alignments) == 3
    assert all(len(line.split()) == n for line, n in zip(result.alignments, (3, 2, 1)))  # argmax: one per word
    gold = [parse_pharaoh(line) for line in result.alignments]
    scored = list(align_steps(translator, sources, targets, gold, layer=1, head=2))[-1]
    assert scored.aer_heads.shape == (2, 4)
    assert scored.aer_heads[1, 2] == pytest.approx(0.0)
    assert scored.best_head()[2] == pytest.approx(0.0)
    assert 0.0 <= scored.aer_average <= 1.0 and scored.aer_layers.shape == (2,)
    with pytest.raises(InputError):
        list(align_steps(translator, sources, targets, [parse_pharaoh("0-5")] * 3))
    with pytest.raises(InputError):
        list(align_steps(translator, sources, targets, layer=1))
