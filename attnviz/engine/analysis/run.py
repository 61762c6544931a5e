"""Head statistics over a corpus as a generator of typed events, the one walk the CLI, the GUI and tests share.

``corpus_pairs`` finds the sentences (a checkpoint's own val/test split through its recipe, or text files);
``head_stats_steps`` tokenizes them, decodes greedily in batches when no targets are given, runs the teacher-forced
attention batch by batch and yields ``AnalysisProgress`` events, then one ``HeadStatsReady`` with the
``HeadStats``. A stop event is checked between batches: a stopped run yields nothing more.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from attnviz.engine.analysis.corpus import Example, attention_batches, batch_order, encode_corpus, greedy_targets
from attnviz.engine.analysis.llm_heads import prompt_card, prompt_rows, stats_notes
from attnviz.engine.analysis.names import STATS
from attnviz.engine.analysis.stats import HeadStats, punctuation_table, row_statistics, start_table
from attnviz.engine.corpus.reader import load_splits, read_lines, read_parallel, resolve_data_dir
from attnviz.engine.errors import ConfigError, InputError, check_on_cpu

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator


@dataclass(frozen=True)
class AnalysisProgress:
    done: int  # sentences (or batches' sentences) finished in this phase
    total: int
    phase: str  # "decoding" (greedy outputs) or "attention" (statistics)


@dataclass(frozen=True)
class HeadStatsReady:
    stats: HeadStats
    role: str = "main"  # "compare": the statistics of a second checkpoint on the same corpus


def comparable_kinds(a: Mapping[str, tuple[int, int]], b: Mapping[str, tuple[int, int]]) -> tuple[str, ...]:
    """The attention kinds two layouts (kind -> (layers, heads)) share with the same layers x heads: what a
    comparison B - A can show."""
    return tuple(kind for kind in a if b.get(kind) == a[kind])


def _describe_layout(translator: Translator) -> str:
    layout = translator.kind.layout(translator.config)
    return ", ".join(f"{kind} {layers}x{heads}" for kind, (layers, heads) in layout.items())


def load_comparable(path: str, translator: Translator) -> Translator:
    """A second checkpoint to compare with ``translator``: the one check the CLI and the GUI make before any work.
    InputError unless its vocabularies are the same and it shares an attention kind of the same layers x heads."""
    from attnviz.engine.loading import load_translator

    other = load_translator(path, translator.dtype)  # at the same precision: differences are the models'
    name = Path(path).name
    if (other.src_vocab, other.tgt_vocab) != (translator.src_vocab, translator.tgt_vocab):
        raise InputError(f"{name} has other vocabularies than the loaded model; compare checkpoints of the same "
                         "vocabularies (e.g. two epochs of one run, or models trained on the same data)")
    if not comparable_kinds(translator.kind.layout(translator.config), other.kind.layout(other.config)):
        raise InputError(f"{name} cannot be compared with the loaded model: its attention ({_describe_layout(other)}"
                         f" layers x heads) shares no kind of the same layers x heads with the loaded model's "
                         f"({_describe_layout(translator)}); compare checkpoints of one architecture (e.g. two "
                         "epochs of one run)")
    return other


def corpus_pairs(translator: Translator, split: str = "val", src_file: str | None = None, tgt_file: str | None = None,
                 limit: int = 0, data_dir=None) -> tuple[list[str], list[str] | None]:
    """Sources and (possibly None) targets: ``src_file`` (+ ``tgt_file``), else the model's recipe's ``split``."""
    if src_file:
        if tgt_file:
            pairs, _ = read_parallel(src_file, tgt_file)
            sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
        else:
            sources, targets = [line for line in read_lines(src_file) if line.strip()], None
    else:
        from attnviz.engine.training.evaluation import recipe_for

        recipe = recipe_for(translator, None)
        pairs = load_splits(recipe.corpus, resolve_data_dir(data_dir)).get(split)
        if not pairs:
            raise ConfigError(f"the {recipe.name} corpus has no {split} split; give a source file",
                              settings=("split", "src"))
        sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    if limit:
        sources, targets = sources[:limit], (targets[:limit] if targets is not None else None)
    if not sources:
        raise InputError("the corpus has no sentences")
    return sources, targets


def prepare_examples(translator: Translator, sources: Sequence[str], targets: Sequence[str] | None,
                     stop: threading.Event | None = None, batch_size: int = 128) -> Iterator:
    """Yield decoding progress, then the examples list (targets greedy-decoded when ``targets`` is None)."""
    if not translator.has_source:  # a language model's corpus is its texts, teacher-forced
        targets = targets if targets is not None else sources
    examples = encode_corpus(translator, sources, targets)
    if targets is not None:
        yield examples
        return
    done, decoded = 0, list(examples)
    for chunk in batch_order(examples, batch_size):
        if stop is not None and stop.is_set():
            return
        outputs = greedy_targets(translator.model, [examples[i] for i in chunk], len(chunk))
        for i, ex in zip(chunk, outputs, strict=True):
            decoded[i] = ex
        done += len(chunk)
        yield AnalysisProgress(done, len(examples), "decoding")
    yield decoded


def head_stats_steps(translator: Translator, sources: Sequence[str], targets: Sequence[str] | None = None, *,
                     batch_size: int = 64, stop: threading.Event | None = None
                     ) -> Iterator[AnalysisProgress | HeadStatsReady]:
    """Statistics of every head over the corpus; targets None teacher-forces the model's own greedy outputs."""
    check_on_cpu(translator, "Head statistics")
    examples: list[Example] = []
    for item in prepare_examples(translator, sources, targets, stop):
        if isinstance(item, AnalysisProgress):
            yield item
        else:
            examples = item
    if not examples:
        return
    kinds = translator.kind.attention_kinds
    layout = translator.kind.layout(translator.config)
    n = len(examples)
    sums = {k: {s: np.zeros((n, *layout[k])) for s in STATS} for k in kinds}
    rows = {k: np.zeros(n) for k in kinds}
    vocabs = {"src": translator.src_vocab, "tgt": translator.tgt_vocab}
    punct = {side: punctuation_table(vocab) for side, vocab in vocabs.items()}
    starts = {side: start_table(vocab) for side, vocab in vocabs.items()}
    done = 0
    for batch in attention_batches(translator.model, examples, kinds, batch_size):
        for kind, attn in batch.attention.items():
            side = "tgt" if kind == "decoder" else "src"
            queries, keys, seen = batch.queries(kind), batch.keys(kind), None
            if translator.kind.reads_prompt:  # one softmax over prompt and output: see llm_heads
                attn, queries, keys, seen = prompt_rows(translator, kind, attn, batch.src, batch.tgt_in)
            figures, count = row_statistics(attn, queries, keys, punct[side], kind, starts[side], seen)
            rows[kind][batch.index] = count.numpy()
            for name, value in figures.items():
                sums[kind][name][batch.index] = value.numpy()
        done += len(batch.index)
        yield AnalysisProgress(done, n, "attention")
        if stop is not None and stop.is_set():
            return
    per_sentence = {k: {s: v / np.maximum(rows[k], 1)[:, None, None] for s, v in sums[k].items()} for k in kinds}
    texts = sources if translator.has_source or targets is None else targets  # a language model: its texts
    yield HeadStatsReady(HeadStats(tuple(texts), per_sentence, rows,
                                   "greedy" if targets is None and translator.has_source else "reference",
                                   {**stats_notes(translator), **prompt_card(translator, sources)}))


def compute_head_stats(translator: Translator, sources: Sequence[str], targets: Sequence[str] | None = None,
                       batch_size: int = 64) -> HeadStats:
    """The statistics without progress (tests, scripts)."""
    for event in head_stats_steps(translator, sources, targets, batch_size=batch_size):
        if isinstance(event, HeadStatsReady):
            return event.stats
    raise RuntimeError("head statistics ended without a result")
