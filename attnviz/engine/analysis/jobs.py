"""The Analysis view's background jobs: generators the GUI's worker runs (the CLI drives the same engine steps).

``analysis_job`` chains head statistics, the AER of every head with a gold file, and a second checkpoint's
statistics; ``importance_job`` measures the BLEU each head is worth; ``views_job`` computes one sentence under
every view. Torch loads only when a job runs, so the GUI imports this module at start-up without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator


def read_corpus(translator: Translator, corpus: tuple[str | None, str | None, str | None], limit: int,
                data_dir: str | None = None, gold: tuple[str, bool | None, bool] | None = None):
    """(sources, references or None, the gold set or None) of a corpus choice: a split ``(split, None, None)``,
    text files ``(None, src, tgt)`` or an alignment set ``("pairs", file, None)`` ('source ||| target' lines).
    ``gold`` is (gold file, numbered from 1 (None: detect), reverse); text files and sets are read by the one
    set reader (``goldset.read_set``) the command line uses."""
    from attnviz.engine.analysis.goldset import read_set, with_gold
    from attnviz.engine.analysis.run import corpus_pairs

    split, src, tgt = corpus
    path, one_based, reverse = gold or (None, None, False)
    if split == "pairs" or (gold and src and tgt):
        found = read_set(src if split == "pairs" else None, None if split == "pairs" else src, tgt, path,
                         one_based=one_based, reverse=reverse, limit=limit)
        return [" ".join(w) for w in found.sources], [" ".join(w) for w in found.targets], found if gold else None
    sources, refs = corpus_pairs(translator, split or "val", src, tgt, limit, data_dir)
    if path is None or refs is None:
        return sources, refs, None
    pairs = [(tuple(s.split()), tuple(t.split())) for s, t in zip(sources, refs, strict=True)]
    return sources, refs, with_gold(pairs, path, {"corpus": f"{split or 'val'} split"}, one_based=one_based,
                                    reverse=reverse)


def analysis_job(translator: Translator, corpus: tuple[str | None, str | None, str | None], limit: int, targets: str,
                 gold: tuple[str, bool | None, bool] | None, compare: str | None, stop, data_dir: str | None = None):
    """Worker job: head statistics, then (with a gold file and targets) the AER of every cross-attention head, then
    (with a second checkpoint) that checkpoint's statistics on the same corpus."""
    from attnviz.engine.analysis.alignment import AlignmentReady, align_steps
    from attnviz.engine.analysis.run import HeadStatsReady, head_stats_steps, load_comparable

    other = load_comparable(compare, translator) if compare else None  # refused before any work
    sources, refs, gold_set = read_corpus(translator, corpus, limit, data_dir, gold)
    use_refs = targets == "reference" or not translator.has_source  # a language model reads its texts
    yield from head_stats_steps(translator, sources, refs if use_refs else None, stop=stop)
    if gold_set is not None and not stop.is_set():
        for aligned in align_steps(translator, gold_set.sources, gold_set.targets, gold_set.gold(), stop=stop):
            if isinstance(aligned, AlignmentReady):  # how the gold file was read, said as the command line says it
                aligned.settings["gold"] = gold_set.describe()
            yield aligned
    if other is not None and not stop.is_set():
        for event in head_stats_steps(other, sources, refs if use_refs else None, stop=stop):
            yield HeadStatsReady(event.stats, "compare") if isinstance(event, HeadStatsReady) else event


def importance_job(translator: Translator, corpus: tuple[str | None, str | None, str | None], limit: int, stop,
                   data_dir: str | None = None, sample: int | None = None):
    """Worker job: every head (or a seeded random ``sample`` of them) switched off alone on the corpus (a split, or
    a source and a reference file)."""
    from attnviz.engine.analysis.importance import importance_steps
    from attnviz.engine.errors import InputError

    split, src, tgt = corpus
    sources, refs, _ = read_corpus(translator, corpus, limit, data_dir)
    if refs is None:
        raise InputError("Head importance is measured in BLEU and needs references: choose a source file and its "
                         "reference file, or a split of the model's corpus.")
    source = f"{src}" if split == "pairs" else f"{src} / {tgt}" if src else f"{split} split"
    yield from importance_steps(translator, list(zip(sources, refs)), source=source, stop=stop, sample=sample)


def views_job(translator: Translator, translation, compare: str | None = None):
    """Worker job: the sentence under every view; with a second checkpoint, its raw weights and the difference."""
    from attnviz.engine.analysis.contributions import sentence_views
    from attnviz.engine.analysis.run import load_comparable

    other_model = load_comparable(compare, translator) if compare else None  # refused before any work
    views = sentence_views(translator, translation.src_tokens, translation.decoder_inputs)
    if other_model is not None:
        other = sentence_views(other_model, translation.src_tokens, translation.decoder_inputs)["raw"]
        same = {k: v for k, v in other.items() if k in views["raw"] and v.shape == views["raw"][k].shape}
        views["compare"] = other
        views["difference"] = {k: v - views["raw"][k] for k, v in same.items()}
    yield views, {kind: translation.axis_labels(kind) for kind in translation.attention}
