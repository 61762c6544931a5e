"""Word alignments read from cross-attention over a test set's words, scored against gold links.

Each pair is forced-decoded; the set's words are tokenised one by one and the attention merged back into them
(``setwords``), so links count the set's words whatever the model's tokenizer does. A target word j's row is the
one that predicts its tokens or, in the "shift" variant (Chen et al. 2020), the row of the following step (whose
input is the word itself); both are measured in one pass. A link is the row's argmax, or every source word with
weight >= a threshold; the chosen method is one layer's head or the average of all layers and heads. With gold links
every head, every layer's average and the chosen method get precision, recall and AER, beside two baselines: the
diagonal and the best single head. Given a model of the other direction, its links are turned round and combined
with these (intersection, union, grow-diag-final), as the published neural AERs are computed. A decoder-only LLM
(a kind that ``reads_prompt``) is aligned from its sentence's span of the prompt, renormalised over the span
(``llm_words``); its reverse is the same model prompted the other way, or another folder.

Links are (source word, target word), 0-based, written ``i-j`` (Pharaoh). Names: L layers, H heads, n target
words, m source words.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.engine.analysis.corpus import Example, attention_batches
from attnviz.engine.analysis.goldset import parse_pharaoh
from attnviz.engine.analysis.llm_words import llm_examples, prompt_settings
from attnviz.engine.analysis.run import AnalysisProgress
from attnviz.engine.analysis.scoring import Counts, aer, score_links
from attnviz.engine.analysis.setwords import TokenReport, WordTokens, tokenize_words, word_attention
from attnviz.engine.analysis.symmetrise import SYMMETRISATIONS, diagonal
from attnviz.engine.errors import ConfigError, InputError, check_on_cpu
from attnviz.engine.heads import NUMBERING

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

__all__ = ["AlignmentReady", "aer", "align_steps", "format_pharaoh", "link_matrix", "parse_pharaoh", "to_links"]

Links = set[tuple[int, int]]
Gold = Sequence[tuple[Links, Links]]
VARIANTS = ("plain", "shift")


def link_matrix(rows: np.ndarray, threshold: float | None = None) -> np.ndarray:
    """Links as a bool matrix [..., n, m]: the argmax of each row, or every weight >= ``threshold``; a row with no
    weight (a word that gave no token) links nothing."""
    if threshold is not None:
        return rows >= threshold
    out = np.zeros(rows.shape, dtype=bool)
    if rows.shape[-1] == 0:  # no source words: no links
        return out
    np.put_along_axis(out, rows.argmax(-1)[..., None], True, axis=-1)
    return out & (rows.sum(-1, keepdims=True) > 0)


def to_links(matrix: np.ndarray) -> Links:
    """A [n, m] bool link matrix -> {(source i, target j)}."""
    return {(int(i), int(j)) for j, i in zip(*np.nonzero(matrix))}


def format_pharaoh(links: Links) -> str:
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def gold_matrices(sure: Links, possible: Links, n: int, m: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Gold links as bool matrices [n, m] (sure, possible with sure); out-of-range links raise InputError."""
    s, p = np.zeros((n, m), dtype=bool), np.zeros((n, m), dtype=bool)
    for i, j in possible | sure:
        if not (0 <= i < m and 0 <= j < n):
            raise InputError(f"{where}: gold link {i}-{j} (0-based) is outside the sentence ({m} source, {n} target "
                             "words)")
        p[j, i] = True
    for i, j in sure:
        s[j, i] = True
    return s, p


@dataclass(frozen=True)
class AlignmentReady:
    """Alignments of a corpus; with gold links, AER per layer x head, per layer (heads averaged) and overall (of
    the variant asked for: plain or shift), and ``scores``, every figure with precision and recall."""

    alignments: tuple[str, ...]  # Pharaoh line per sentence: the chosen method, symmetrised with a reverse model
    chosen: str  # "layer L head H" (1-based, as every output numbers heads) or "average of all layers and heads"
    aer_heads: np.ndarray | None = None  # [L, H]
    aer_layers: np.ndarray | None = None  # [L], attention averaged over the layer's heads
    aer_average: float | None = None  # attention averaged over all layers and heads
    scores: dict[str, Any] = field(default_factory=dict)  # JSON-able: name -> Score's figures
    tokens: TokenReport = field(default_factory=TokenReport)
    settings: dict[str, Any] = field(default_factory=dict)  # what reproduces the figures

    def best_head(self) -> tuple[int, int, float] | None:
        if self.aer_heads is None:
            return None
        layer, head = np.unravel_index(int(np.argmin(self.aer_heads)), self.aer_heads.shape)
        return int(layer), int(head), float(self.aer_heads[layer, head])

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"chosen": self.chosen, "numbering": NUMBERING, **self.settings,
                               "tokens": self.tokens.to_json(), "alignments": list(self.alignments)}
        if self.aer_heads is None or self.aer_layers is None or self.aer_average is None:
            return out  # no gold links, no error rates
        out.update(aer_heads=np.round(self.aer_heads, 4).tolist(), aer_layers=np.round(self.aer_layers, 4).tolist(),
                   aer_average=round(self.aer_average, 4), scores=self.scores)
        out["best"] = self.scores["best head" + (", shift" if self.settings.get("shift") else "")]
        return out


@dataclass
class _Pass:
    """One model's reading of the corpus: the chosen method's links per variant, and (with gold) counts."""

    links: dict[str, list[Links]]
    sizes: list[tuple[int, int]]  # (n, m) per sentence
    counts: dict[tuple[str, str], Counts] = field(default_factory=dict)  # (variant, heads|layers|all)


def _within_positions(number: int, side: str, words: WordTokens, limit: int) -> WordTokens:
    """``words`` when the model can read all its tokens; a pair longer than the model's positions is refused (its
    words past them could not be aligned, and its word-by-word maps grow with the square of its length)."""
    if len(words.tokens) > limit:
        raise InputError(f"sentence {number}: the {side} is {len(words.tokens):,} tokens long ({words.n_words:,} "
                         f"words), more than the {limit:,} this model reads at once (its positions); split the pair "
                         "into shorter ones, or leave it out")
    return words


def _examples(translator: Translator, sources, targets, report: TokenReport | None) -> list[tuple[Example, WordTokens,
                                                                                       WordTokens, int]]:
    """Each pair as ids, with its token -> word maps and the column of its first source token (an LLM's: its
    prompt's, the span's first column: ``llm_words``)."""
    if translator.kind.reads_prompt:
        return llm_examples(translator, sources, targets, report)[0]
    src_vocab, tgt_vocab = translator.src_vocab, translator.tgt_vocab
    offset = 1 if translator.kind.source_bos else 0
    out = []
    for number, (src_words, tgt_words) in enumerate(zip(sources, targets, strict=True), 1):
        src = _within_positions(number, "source", tokenize_words(translator.src_spec, src_words),
                                translator.model.max_source_len - 2)
        tgt = _within_positions(number, "target", tokenize_words(translator.tgt_spec, tgt_words),
                                translator.model.max_target_len - 2)
        if report is not None:
            report.add(number, "source", src_words, src, translator.src_spec, src_vocab)
            report.add(number, "target", tgt_words, tgt, translator.tgt_spec, tgt_vocab)
        if not src.tokens:
            raise InputError(f"sentence {number}: the source gives the model no token to read")
        src_ids = src_vocab.encode(list(src.tokens), add_sos_eos=True)[1 - offset:]
        out.append((Example(tuple(src_ids), tuple(tgt_vocab.encode(list(tgt.tokens), add_sos_eos=True))), tgt, src,
                    offset))
    return out


def _check_head(translator: Translator, layer: int | None, head: int | None, flags: str = "--layer/--head") -> None:
    if "cross" not in translator.kind.attention_kinds:
        raise ConfigError("this model has no cross-attention to align with")
    lay, heads = translator.kind.layout(translator.config)["cross"]
    first, second = flags.split("/")
    if (layer is None) != (head is None):
        raise InputError(f"give both {first} (1..{lay}) and {second} (1..{heads}), or neither for the average")
    if layer is not None and not 0 <= layer < lay:
        raise InputError(f"{first} {layer + 1} is out of range: this model has {lay} cross-attention layer"
                         f"{'s' if lay != 1 else ''} (1..{lay})")
    if head is not None and not 0 <= head < heads:
        raise InputError(f"{second} {head + 1} is out of range: this model has {heads} cross-attention head"
                         f"{'s' if heads != 1 else ''} per layer (1..{heads})")


UNKNOWN_LANGUAGE = "und"  # ISO 639's "undetermined": a folder that names no language matches any


def _check_reverse_direction(translator: Translator, reverse: Translator) -> None:
    """The reverse model must read the forward model's target language and write its source language: given the
    forward model again, it would read the targets with the wrong vocabulary and score nonsense without a word."""
    wanted = (translator.tgt_spec.lang, translator.src_spec.lang)
    got = (reverse.src_spec.lang, reverse.tgt_spec.lang)
    if any(w != g and UNKNOWN_LANGUAGE not in (w, g) for w, g in zip(wanted, got)):
        raise InputError(f"--reverse-model translates {got[0]}->{got[1]}, but the reverse of this model "
                         f"({wanted[1]}->{wanted[0]}) is {wanted[0]}->{wanted[1]}: give a model of that direction")


def _read(translator: Translator, sources, targets, gold: Gold | None, layer, head, threshold, batch_size, stop,
          report: TokenReport | None, phase: str):
    """Generator of progress; returns a ``_Pass`` (through ``yield from``)."""
    examples = _examples(translator, sources, targets, report)
    result = _Pass({v: [set() for _ in examples] for v in VARIANTS}, [(0, 0)] * len(examples))
    done = 0
    for batch in attention_batches(translator.model, [e[0] for e in examples], ("cross",), batch_size):
        cross = batch.attention["cross"].numpy()  # [B, L, H, T, S]
        for b, index in enumerate(batch.index):
            _, tgt, src, offset = examples[index]
            result.sizes[index] = (tgt.n_words, src.n_words)
            for variant in VARIANTS:
                rows = word_attention(cross[b], tgt, src, offset, variant == "shift")  # [L, H, n, m]
                chosen = rows[layer, head] if layer is not None else rows.mean((0, 1))
                result.links[variant][index] = to_links(link_matrix(chosen, threshold))
                if gold is not None:
                    s, p = gold_matrices(*gold[index], tgt.n_words, src.n_words, f"gold line {index + 1}")
                    for name, matrix in (("heads", rows), ("layers", rows.mean(1)), ("all", rows.mean((0, 1)))):
                        result.counts.setdefault((variant, name), Counts()).add(link_matrix(matrix, threshold), s, p)
        done += len(batch.index)
        yield AnalysisProgress(done, len(examples), phase)
        if stop is not None and stop.is_set():
            return None
    return result


def _scores(forward: _Pass, gold: Gold, symmetrised: dict[str, list[Links]]) -> dict[str, Any]:
    sure, possible = [g[0] for g in gold], [g[1] for g in gold]
    out: dict[str, Any] = {}
    for variant in VARIANTS:
        tail = "" if variant == "plain" else ", shift"
        heads = forward.counts[variant, "heads"]
        best = np.unravel_index(int(np.argmin(heads.aer())), heads.aer().shape)
        layers = forward.counts[variant, "layers"]
        out["method" + tail] = score_links(forward.links[variant], sure, possible).to_json()
        out["best head" + tail] = {"layer": int(best[0]) + 1, "head": int(best[1]) + 1,
                                   **heads.score(tuple(int(x) for x in best)).to_json()}
        out["layer average" + tail] = [{"layer": la + 1, **layers.score((la,)).to_json()}
                                       for la in range(len(layers.aer()))]
        out["all heads average" + tail] = forward.counts[variant, "all"].score().to_json()
    out["diagonal"] = score_links([diagonal(n, m) for n, m in forward.sizes], sure, possible).to_json()
    for name, links in symmetrised.items():
        out[name] = score_links(links, sure, possible).to_json()
    return out


def _gold_counts(gold: Gold) -> dict[str, int]:
    sure = sum(len(s) for s, _ in gold)
    return {"sure_links": sure, "possible_links": sum(len(p | s) for s, p in gold) - sure}


def align_steps(translator: Translator, sources: Sequence[str | Sequence[str]], targets: Sequence[str | Sequence[str]],
                gold: Gold | None = None, *, layer: int | None = None, head: int | None = None, shift: bool = False,
                threshold: float | None = None, batch_size: int = 64, stop: threading.Event | None = None,
                reverse=None, reverse_layer: int | None = None, reverse_head: int | None = None,
                symmetrise: str = "grow-diag-final") -> Iterator[AnalysisProgress | AlignmentReady]:
    """Forced-decode each target, align its words with its source's, and (with ``gold``, 0-based (source, target)
    links per pair) score every configuration. A sentence given as text is its space-separated words. ``reverse``,
    a model of the other direction, adds its links turned round and ``symmetrise`` picks the combination printed.
    ``layer``/``head`` (and ``reverse_layer``/``reverse_head``, the same by default) count from 0."""
    reverse_layer, reverse_head = _checked_request(translator, reverse, symmetrise, (layer, head),
                                                   (reverse_layer, reverse_head))
    src_words = [tuple(s.split()) if isinstance(s, str) else tuple(s) for s in sources]
    tgt_words = [tuple(t.split()) if isinstance(t, str) else tuple(t) for t in targets]
    report = TokenReport()
    forward = yield from _read(translator, src_words, tgt_words, gold, layer, head, threshold, batch_size, stop,
                               report, "alignment")
    if forward is None:
        return
    variant = "shift" if shift else "plain"
    lines = forward.links[variant]
    symmetrised: dict[str, list[Links]] = {}
    if reverse is not None:
        backward = yield from _read(reverse, tgt_words, src_words, None, reverse_layer, reverse_head, threshold,
                                    batch_size, stop, None, "reverse alignment")
        if backward is None:
            return
        symmetrised = _symmetrised(lines, backward.links[variant], forward.sizes)
        lines = symmetrised[symmetrise]
    chosen = (f"layer {layer + 1} head {head + 1}" if layer is not None and head is not None
              else "average of all layers and heads")
    settings = _settings(threshold, (layer, head), shift, (symmetrise, reverse_layer, reverse_head), reverse, lines)
    settings.update(prompt_settings(translator, src_words, reverse))
    texts = tuple(format_pharaoh(links) for links in lines)
    if gold is None:
        yield AlignmentReady(texts, chosen, tokens=report, settings=settings)
        return
    settings.update(_gold_counts(gold))
    yield AlignmentReady(texts, chosen, forward.counts[variant, "heads"].aer(), forward.counts[variant, "layers"].aer(),
                         float(forward.counts[variant, "all"].aer()), _scores(forward, gold, symmetrised),
                         report, settings)


def _checked_request(translator: Translator, reverse: Translator | None, symmetrise: str,
                     pair: tuple[int | None, int | None],
                     reverse_pair: tuple[int | None, int | None]) -> tuple[int | None, int | None]:
    """The request refused with one message where it cannot run; the reverse model's layer and head (by default
    the forward model's)."""
    if symmetrise not in SYMMETRISATIONS:
        raise InputError(f"symmetrisation must be one of {', '.join(SYMMETRISATIONS)}, not {symmetrise!r}")
    _check_head(translator, *pair)
    for model in (translator, reverse):
        check_on_cpu(model, "Word alignment")
    if reverse is None:
        return reverse_pair
    chosen = pair if reverse_pair == (None, None) else reverse_pair
    _check_head(reverse, *chosen, "--reverse-layer/--reverse-head")
    _check_reverse_direction(translator, reverse)
    return chosen


def _symmetrised(lines: list[Links], backward: list[Links], sizes) -> dict[str, list[Links]]:
    """The reverse model's links turned round, and each symmetrisation of them with the forward ones."""
    turned = [{(i, j) for j, i in links} for links in backward]
    out: dict[str, list[Links]] = {"reverse model": turned}
    for name, combine in SYMMETRISATIONS.items():
        out[name] = [combine(f, b, n, m) for f, b, (n, m) in zip(lines, turned, sizes, strict=True)]
    return out


def _settings(threshold: float | None, pair: tuple[int | None, int | None], shift: bool,
              reverse_choice: tuple[str, int | None, int | None], reverse, lines: list[Links]) -> dict[str, Any]:
    """What the alignment was made with, 1-based as the app shows layers and heads."""
    layer, head = pair
    symmetrise, reverse_layer, reverse_head = reverse_choice

    def shown(index: int | None) -> int | None:
        return None if index is None else index + 1

    return {"method": "argmax" if threshold is None else f"weight >= {threshold:g}", "layer": shown(layer),
            "head": shown(head), "shift": shift, "symmetrisation": symmetrise if reverse is not None else None,
            "reverse_layer": None if reverse is None else shown(reverse_layer),
            "reverse_head": None if reverse is None else shown(reverse_head),
            "predicted_links": sum(len(links) for links in lines), "output_indexing": "0-based, source-target"}
