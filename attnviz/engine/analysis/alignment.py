"""Word alignments read from cross-attention, Pharaoh format, and the Alignment Error Rate against gold links.

A target word j's attention row is the one that predicts it (row j of the decoder inputs ``<sos> y1 .. yn``) or,
in the "shift" variant, the row of the following step (row j + 1, whose input is the word itself). Its columns are
the source words (``<sos>``/``<eos>`` dropped) and the row is renormalised to sum to 1 over them. Subword pieces
merge into words from a word-boundary mask (True where a piece starts a word): a target word's rows are averaged,
a source word's columns summed. A link is the row's argmax, or every source word with weight >= a threshold.

Links are (source word, target word), 0-based, written ``i-j`` (Pharaoh). Gold files mark sure links ``i-j`` and
possible ones ``i?j`` (``i-j-S``/``i-j-P`` also read); possible includes sure. AER = 1 - (|A & S| + |A & P|) /
(|A| + |S|) over the whole corpus (Och & Ney 2003). Gold indices count the tokens the model's tokenizer makes.
Names: L layers, H heads, n target words, m source words.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnviz.engine.analysis.corpus import attention_batches, encode_corpus
from attnviz.engine.analysis.run import AnalysisProgress
from attnviz.engine.corpus.reader import read_lines
from attnviz.engine.errors import ConfigError, InputError
from attnviz.engine.heads import NUMBERING, numbered

# One gold link: i?j (possible), or i-j with an optional -S (sure, the default) or -P; word numbers from 0, short
# enough to be words (a number of thousands of digits is refused as a link, not passed to int()).
_LINK = re.compile(r"(?P<src>\d{1,6})(?:\?(?P<possible>\d{1,6})|-(?P<tgt>\d{1,6})(?:-(?P<kind>[SsPp]))?)", re.ASCII)

Links = set[tuple[int, int]]


def word_rows(cross: np.ndarray, shift: bool = False) -> np.ndarray:
    """Cross-attention [..., n + 1, m + 2] of a teacher-forced pair -> [..., n, m], rows renormalised over words."""
    rows = cross[..., 1:, 1:-1] if shift else cross[..., :-1, 1:-1]
    return rows / np.maximum(rows.sum(-1, keepdims=True), 1e-12)


def merge_pieces(matrix: np.ndarray, tgt_starts: Sequence[bool], src_starts: Sequence[bool]) -> np.ndarray:
    """Piece-level [..., Tp, Sp] -> word-level [..., Tw, Sw]: target pieces averaged, source pieces summed."""
    tgt_word = np.cumsum(np.asarray(tgt_starts, dtype=bool)) - 1  # piece -> word index
    src_word = np.cumsum(np.asarray(src_starts, dtype=bool)) - 1
    if tgt_word.min(initial=0) < 0 or src_word.min(initial=0) < 0:
        raise ValueError("the first piece must start a word")
    tgt_onehot = np.eye(tgt_word.max() + 1)[tgt_word]  # [Tp, Tw]
    src_onehot = np.eye(src_word.max() + 1)[src_word]  # [Sp, Sw]
    summed = np.swapaxes(tgt_onehot, 0, 1) @ matrix @ src_onehot  # [..., Tw, Sw]
    return summed / tgt_onehot.sum(0)[:, None]


def link_matrix(rows: np.ndarray, threshold: float | None = None) -> np.ndarray:
    """Links as a bool matrix [..., n, m]: the argmax of each row, or every weight >= ``threshold``."""
    if threshold is not None:
        return rows >= threshold
    out = np.zeros(rows.shape, dtype=bool)
    if rows.shape[-1] == 0:  # no source words: no links
        return out
    np.put_along_axis(out, rows.argmax(-1)[..., None], True, axis=-1)
    return out


def to_links(matrix: np.ndarray) -> Links:
    """A [n, m] bool link matrix -> {(source i, target j)}."""
    return {(int(i), int(j)) for j, i in zip(*np.nonzero(matrix))}


def format_pharaoh(links: Links) -> str:
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def parse_pharaoh(line: str) -> tuple[Links, Links]:
    """One gold line -> (sure, possible) links; possible includes sure. A link is ``i-j`` (sure), ``i?j``
    (possible), or ``i-j-S`` / ``i-j-P``; anything else is refused, never guessed (``0-0-X`` is no possible link)."""
    sure, possible = set(), set()
    for item in line.split():
        match = _LINK.fullmatch(item)
        if match is None:
            shown = item if len(item) <= 40 else item[:20] + "..."
            raise ValueError(f"not a link: {shown!r} (expected i-j, i?j, i-j-S or i-j-P with word numbers from 0)")
        link = (int(match["src"]), int(match["possible"] or match["tgt"]))
        possible.add(link)
        if match["possible"] is None and (match["kind"] or "S").upper() == "S":
            sure.add(link)
    return sure, possible


def aer(predicted: Sequence[Links], sure: Sequence[Links], possible: Sequence[Links]) -> float:
    """Corpus AER = 1 - (|A & S| + |A & P|) / (|A| + |S|); possible links are completed with the sure ones."""
    a_s = a_p = n_a = n_s = 0
    for a, s, p in zip(predicted, sure, possible, strict=True):
        p = p | s
        a_s, a_p, n_a, n_s = a_s + len(a & s), a_p + len(a & p), n_a + len(a), n_s + len(s)
    return 1.0 - (a_s + a_p) / max(n_a + n_s, 1)


def gold_matrices(sure: Links, possible: Links, n: int, m: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Gold links as bool matrices [n, m] (sure, possible with sure); out-of-range links raise InputError."""
    s, p = np.zeros((n, m), dtype=bool), np.zeros((n, m), dtype=bool)
    for i, j in possible | sure:
        if not (0 <= i < m and 0 <= j < n):
            raise InputError(f"{where}: gold link {i}-{j} is outside the sentence ({m} source, {n} target tokens "
                             "as the model tokenizes them)")
        p[j, i] = True
    for i, j in sure:
        s[j, i] = True
    return s, p


@dataclass(frozen=True)
class AlignmentReady:
    """Alignments of a corpus; with gold links, AER per layer x head, per layer (heads averaged) and overall."""

    alignments: tuple[str, ...]  # Pharaoh line per sentence, for the chosen layer/head or the average
    chosen: str  # "layer L head H" (1-based, as every output numbers heads) or "average of all layers and heads"
    aer_heads: np.ndarray | None = None  # [L, H]
    aer_layers: np.ndarray | None = None  # [L], attention averaged over the layer's heads
    aer_average: float | None = None  # attention averaged over all layers and heads

    def best_head(self) -> tuple[int, int, float] | None:
        if self.aer_heads is None:
            return None
        layer, head = np.unravel_index(int(np.argmin(self.aer_heads)), self.aer_heads.shape)
        return int(layer), int(head), float(self.aer_heads[layer, head])

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"chosen": self.chosen, "numbering": NUMBERING, "alignments": list(self.alignments)}
        best = self.best_head()
        if best is None or self.aer_heads is None or self.aer_layers is None or self.aer_average is None:
            return out  # no gold links, no error rates
        layer, head, value = best
        out.update(aer_heads=np.round(self.aer_heads, 4).tolist(), aer_layers=np.round(self.aer_layers, 4).tolist(),
                   aer_average=round(self.aer_average, 4), best=numbered({"kind": "cross", "layer": layer, "head": head,
                                       "aer": round(value, 4)}))
        return out


class _Counts:
    """|A & S|, |A & P|, |A|, |S| summed over sentences for any array of configurations."""

    def __init__(self) -> None:
        self.sums: np.ndarray | None = None  # [4, ...] the four counts per configuration

    def add(self, links: np.ndarray, s: np.ndarray, p: np.ndarray) -> None:  # links [..., n, m]
        parts = np.stack([(links & s).sum((-1, -2)), (links & p).sum((-1, -2)), links.sum((-1, -2)),
                          np.broadcast_to(s.sum(), links.shape[:-2])])
        self.sums = parts if self.sums is None else self.sums + parts

    def aer(self) -> np.ndarray:
        if self.sums is None:
            raise InputError("no sentence was aligned, so there is no alignment error rate to compute")
        a_s, a_p, n_a, n_s = self.sums
        return 1.0 - (a_s + a_p) / np.maximum(n_a + n_s, 1)


def read_gold(path: str, n_sentences: int) -> list[tuple[Links, Links]]:
    lines = read_lines(path)
    if len(lines) != n_sentences:
        raise InputError(f"{path} has {len(lines)} lines but the corpus has {n_sentences} sentences")
    try:
        return [parse_pharaoh(line) for line in lines]
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None


def align_steps(translator, sources: Sequence[str], targets: Sequence[str], gold: Sequence[tuple[Links, Links]] | None
                = None, *, layer: int | None = None, head: int | None = None, shift: bool = False,
                threshold: float | None = None, batch_size: int = 64, stop: threading.Event | None = None
                ) -> Iterator[AnalysisProgress | AlignmentReady]:
    """Forced-decode each target, align it with its source, and (with ``gold``) score every configuration."""
    if "cross" not in translator.kind.attention_kinds:
        raise ConfigError("this model has no cross-attention to align with")
    lay, heads = translator.kind.layout(translator.config)["cross"]
    if (layer is None) != (head is None) or (layer is not None and head is not None
                                              and not (0 <= layer < lay and 0 <= head < heads)):
        raise InputError(f"give both --layer (1..{lay}) and --head (1..{heads}), or neither for the average")
    examples = encode_corpus(translator, sources, targets)
    lines: list[str] = [""] * len(examples)
    counts = {"heads": _Counts(), "layers": _Counts(), "all": _Counts()}
    done = 0
    for batch in attention_batches(translator.model, examples, ("cross",), batch_size):
        cross = batch.attention["cross"].numpy()  # [B, L, H, T, S]
        for b, index in enumerate(batch.index):
            n, m = len(examples[index].tgt) - 2, len(examples[index].src) - 2
            rows = word_rows(cross[b, :, :, : n + 1, : m + 2], shift)  # [L, H, n, m]
            chosen = rows[layer, head] if layer is not None else rows.mean((0, 1))
            lines[index] = format_pharaoh(to_links(link_matrix(chosen, threshold)))
            if gold is not None:
                s, p = gold_matrices(*gold[index], n, m, f"gold line {index + 1}")
                counts["heads"].add(link_matrix(rows, threshold), s, p)
                counts["layers"].add(link_matrix(rows.mean(1), threshold), s, p)
                counts["all"].add(link_matrix(rows.mean((0, 1)), threshold), s, p)
        done += len(batch.index)
        yield AnalysisProgress(done, len(examples), "alignment")
        if stop is not None and stop.is_set():
            return
    chosen = (f"layer {layer + 1} head {head + 1}" if layer is not None and head is not None
              else "average of all layers and heads")
    if gold is None:
        yield AlignmentReady(tuple(lines), chosen)
        return
    yield AlignmentReady(tuple(lines), chosen, counts["heads"].aer(), counts["layers"].aer(),
                         float(counts["all"].aer()))
