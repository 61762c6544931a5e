"""Alignments of the two directions combined (intersection, union, grow-diag-final) and the diagonal baseline.

Links are (source word i, target word j), 0-based, for both directions: the reverse model's links are turned
round before they arrive here. grow-diag-final follows Koehn et al. (2003) and Koehn's definition in Moses
(``symal``'s grow-diag-final, not final-and): start from the intersection; while a sweep adds links, visit the
current links in order (target word, then source word) and add each of their eight neighbours that the union holds
and whose source or target word is still unaligned; then FINAL adds, from the forward links and then the reverse
links, each link whose source or target word is still unaligned. Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable

Links = set[tuple[int, int]]

_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def intersection(forward: Links, backward: Links, n: int = 0, m: int = 0) -> Links:
    return forward & backward


def union(forward: Links, backward: Links, n: int = 0, m: int = 0) -> Links:
    return forward | backward


def grow_diag_final(forward: Links, backward: Links, n: int, m: int) -> Links:
    """Koehn's grow-diag-final over a sentence of ``m`` source and ``n`` target words."""
    alignment = forward & backward
    both = forward | backward
    src_done = {i for i, _ in alignment}
    tgt_done = {j for _, j in alignment}

    def add(link: tuple[int, int]) -> None:
        alignment.add(link)
        src_done.add(link[0])
        tgt_done.add(link[1])

    added = True
    while added:
        added = False
        for j in range(n):
            for i in range(m):
                if (i, j) not in alignment:
                    continue
                for di, dj in _NEIGHBOURS:
                    new = (i + di, j + dj)
                    if new in both and new not in alignment and (new[0] not in src_done or new[1] not in tgt_done):
                        add(new)
                        added = True
    for direction in (forward, backward):  # FINAL(e2f), then FINAL(f2e)
        for j in range(n):
            for i in range(m):
                if (i, j) in direction and (i not in src_done or j not in tgt_done):
                    add((i, j))
    return alignment


SYMMETRISATIONS: dict[str, Callable[[Links, Links, int, int], Links]] = {
    "intersection": intersection, "union": union, "grow-diag-final": grow_diag_final}


def diagonal(n: int, m: int) -> Links:
    """The diagonal baseline: counting from 1, target word j links source word round(j * m / n) (halves rounded
    up), kept within 1..m; returned 0-based. The first and last target words link near the first and last source
    words whatever the lengths."""
    links = set()
    for j in range(1, n + 1):
        i = min(max((2 * j * m + n) // (2 * n), 1), m)  # round half up of j * m / n, in whole numbers
        links.add((i - 1, j - 1))
    return links if m else set()
