"""Symmetrised alignments and the diagonal baseline against small cases worked out by hand."""

from __future__ import annotations

from attnviz.engine.analysis.symmetrise import diagonal, grow_diag_final, intersection, union


def test_intersection_and_union():
    forward, backward = {(0, 0), (1, 1), (2, 1)}, {(0, 0), (1, 1), (2, 2)}
    assert intersection(forward, backward) == {(0, 0), (1, 1)}
    assert union(forward, backward) == {(0, 0), (1, 1), (2, 1), (2, 2)}


def test_grow_diag_final_grows_along_the_diagonal_but_not_between_aligned_words():
    # 4 source x 4 target words. Intersection {0-0, 1-1}; the union adds 3-3, 0-1 and 2-2. Growing from 1-1 adds its
    # diagonal neighbour 2-2 (source 2 unaligned), then from 2-2 its neighbour 3-3; 0-1 joins two words that are
    # already aligned, so neither growing nor FINAL adds it: the result is the diagonal, not the union.
    forward, backward = {(0, 0), (1, 1), (3, 3)}, {(0, 0), (1, 1), (0, 1), (2, 2)}
    assert grow_diag_final(forward, backward, 4, 4) == {(0, 0), (1, 1), (2, 2), (3, 3)}
    assert union(forward, backward) - grow_diag_final(forward, backward, 4, 4) == {(0, 1)}


def test_grow_diag_final_adds_a_lone_link_whose_source_is_unaligned():
    # 3 source x 2 target words. 2-0 is no neighbour of the intersection's 0-0, so growing leaves it; FINAL adds it
    # because source word 2 is unaligned, though target word 0 is aligned (final-and would not).
    assert grow_diag_final({(0, 0), (2, 0)}, {(0, 0)}, 2, 3) == {(0, 0), (2, 0)}
    # a link only the reverse direction has is added by FINAL(f2e) the same way
    assert grow_diag_final({(0, 0)}, {(0, 0), (1, 1)}, 2, 3) == {(0, 0), (1, 1)}
    assert grow_diag_final(set(), set(), 2, 3) == set()


def test_diagonal_links_target_j_to_round_j_m_over_n_counting_from_1():
    assert diagonal(3, 3) == {(0, 0), (1, 1), (2, 2)}
    # n = 4, m = 2: j = 1..4 -> round(0.5, 1, 1.5, 2) = 1, 1, 2, 2 (halves up), 0-based (i - 1, j - 1)
    assert diagonal(4, 2) == {(0, 0), (0, 1), (1, 2), (1, 3)}
    # n = 2, m = 5: round(2.5) = 3, round(5) = 5
    assert diagonal(2, 5) == {(2, 0), (4, 1)}
    # n = 3, m = 1: round(1/3) = 0 is kept at the first word
    assert diagonal(3, 1) == {(0, 0), (0, 1), (0, 2)}
    assert diagonal(2, 0) == set()
