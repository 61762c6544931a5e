"""Measuring a translator on a corpus split or on two files: BLEU (both flavours), chrF, loss, PPL, accuracy."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from attnviz.engine.config import DecodeConfig
from attnviz.engine.corpus.batching import eval_batches
from attnviz.engine.corpus.reader import Pair, load_split, read_parallel, resolve_data_dir
from attnviz.engine.errors import ConfigError
from attnviz.engine.heads import format_heads
from attnviz.engine.metrics import bleu_tok, chrf, sacrebleu_detok, teacher_forced_stats
from attnviz.engine.search.head_mask import heads_off
from attnviz.engine.search.torch_batch import device_of
from attnviz.engine.training.presets import Recipe, get_preset
from attnviz.engine.translator import Translator


def evaluate_pairs(translator: Translator, pairs: Sequence[Pair], decode: DecodeConfig, source: str) -> dict[str, Any]:
    """BLEU, chrF, loss, PPL and accuracy of a translation model; a language model gets loss, PPL and accuracy."""
    if not translator.has_source:
        return _language_model_report(translator, [t for _, t in pairs], source)
    start = time.perf_counter()
    hyps = translator.translate_batch_tokens([s for s, _ in pairs], decode)
    seconds = time.perf_counter() - start
    hyp_text = [translator.detokenize(h) for h in hyps]
    refs_tok = [translator.tgt_spec.words().tokenize(r) for _, r in pairs]
    hyps = [translator.tgt_spec.scored_words(h) for h in hyps]
    refs_raw = [r for _, r in pairs]
    report: dict[str, Any] = {"source": source, "sentences": len(pairs), "seconds": round(seconds, 2),
                              "decode": f"beam {decode.beam}" if decode.beam > 1 else "greedy"}
    if decode.heads_off:  # say which heads were off, in the text --mask-heads reads back
        report["heads_off"] = format_heads(decode.heads_off, translator.kind.layout(translator.config))
        report["rescale_heads"] = decode.rescale_heads
    report["bleu_tok"], report["bleu_tok_signature"] = bleu_tok(hyps, refs_tok)
    report["sacrebleu"], report["sacrebleu_signature"] = sacrebleu_detok(hyp_text, refs_raw)
    report["chrf"], report["chrf_signature"] = chrf(hyp_text, refs_raw)
    limit = translator.config.max_positions - 2
    encoded = [(translator.prepare_source(s)[1], translator.tgt_vocab.encode(translator.reference_tokens(r)[:limit],
                                                                             True)) for s, r in pairs]
    with heads_off(translator.model, decode.heads_off, decode.rescale_heads):  # the same model the search used
        stats = teacher_forced_stats(translator.model, eval_batches(encoded), device_of(translator.model))
    report.update(loss=stats.loss, ppl=stats.ppl, accuracy=stats.accuracy)
    return report


def _language_model_report(translator: Translator, texts: Sequence[str], source: str) -> dict[str, Any]:
    """Loss (nats per token, the closing ``<eos>`` included), PPL and next-token accuracy over ``texts``."""
    start = time.perf_counter()
    limit = translator.config.max_positions - 2
    encoded: list[tuple[list[int], list[int]]] = [
        ([], translator.tgt_vocab.encode(translator.reference_tokens(t)[:limit], True)) for t in texts]
    stats = teacher_forced_stats(translator.model, eval_batches(encoded), device_of(translator.model))
    return {"source": source, "sentences": len(texts), "seconds": round(time.perf_counter() - start, 2),
            "decode": "teacher forced", "loss": stats.loss, "ppl": stats.ppl, "accuracy": stats.accuracy,
            "tokens": stats.tokens}


# The corpus of a model that names none (an imported folder, an LLM): Multi30k's, for the language pairs it has
MULTI30K = {("de", "en"): "multi30k-de-en", ("fr", "en"): "multi30k-fr-en", ("en", "de"): "multi30k-en-de"}


def recipe_for(translator: Translator, preset: str | None) -> Recipe:
    """The recipe whose corpus a measurement reads: ``preset``, the one the model was trained with, or (a model
    that names none, such as an imported folder or an LLM) Multi30k's for its language pair."""
    if preset:
        return get_preset(preset)
    if translator.card.recipe is not None:
        return Recipe.from_dict(dict(translator.card.recipe))
    src, tgt = translator.src_spec.lang, translator.tgt_spec.lang
    if (src, tgt) in MULTI30K:
        return get_preset(MULTI30K[src, tgt])
    raise ConfigError(f"this model does not say which corpus it was trained on, and Multi30k has no {src}-{tgt} "
                      "pair; give a source file and a reference file (the Analysis tab: Corpus, Text files...; "
                      "the command line: --src and --ref, or --preset)", settings=("preset", "src", "ref"))


def split_pairs(translator: Translator, split: str, preset: str | None = None, data_dir=None,
                limit: int = 0) -> tuple[list[Pair], str, str]:
    """The (source, reference) pairs of the model's corpus ``split`` (the first ``limit``; 0: all), the corpus
    description and the recipe's name."""
    recipe = recipe_for(translator, preset)
    pairs = load_split(recipe.corpus, resolve_data_dir(data_dir), split)  # only the files this split needs
    if not pairs:
        raise ConfigError(f"the {recipe.name} corpus has no {split} split; measure the val split, or give source "
                          "and reference files", settings=("split", "src", "ref"))
    return (pairs[:limit] if limit else pairs), f"{recipe.name} {split}", recipe.name


def evaluate_split(translator: Translator, split: str, decode: DecodeConfig, preset: str | None = None,
                   data_dir=None, limit: int = 0) -> dict[str, Any]:
    pairs, source, name = split_pairs(translator, split, preset, data_dir, limit)
    report = evaluate_pairs(translator, pairs, decode, source)
    report["preset"], report["split"] = name, split
    return report


def evaluate_files(translator: Translator, src: str, ref: str, decode: DecodeConfig,
                   limit: int = 0) -> dict[str, Any]:
    pairs, dropped = read_parallel(src, ref)
    report = evaluate_pairs(translator, pairs[:limit] if limit else pairs, decode, f"{src} / {ref}")
    report["dropped_empty"] = dropped
    return report
