"""A corpus read, tokenized and encoded for one recipe: the training run's data (``Prepared``).

``prepare`` learns a SentencePiece side's model from the training split, builds the vocabularies (or takes a
resumed run's), cuts sentences to the model's positions and checks that the corpus kept enough pairs. A run's
stop event is read between every ``CHECK_EVERY`` sentences tokenized (the long part: spaCy reads tens of thousands
of pairs), so stopping a run, or closing the app, while its data is prepared ends it within a fraction of a second
(``PreparationStopped``) instead of after the whole corpus; reading the files looks at it every
``corpus.reader.STOP_EVERY_LINES`` lines.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from attnviz.engine.corpus.reader import Pair, PreparationStopped, check_prepared, load_splits, resolve_data_dir
from attnviz.engine.text.tokenize import TokenizerSpec
from attnviz.engine.text.vocab import SPECIALS, Vocab
from attnviz.engine.training.presets import Recipe

CHECK_EVERY = 64  # sentences tokenized between two looks at the stop event


def _check(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise PreparationStopped


def _until_stopped(items: Iterable, stop: threading.Event | None) -> Iterator:
    for n, item in enumerate(items):
        if n % CHECK_EVERY == 0:
            _check(stop)
        yield item


@dataclass
class Prepared:
    """A corpus tokenized and encoded for one recipe."""

    src_vocab: Vocab
    tgt_vocab: Vocab
    train: list[tuple[list[int], list[int]]]
    val: list[tuple[list[int], list[int]]]
    val_pairs: list[Pair]
    val_refs: list[list[str]]
    src_spec: TokenizerSpec  # the recipe's tokenizers, with any SentencePiece model learned for this run
    tgt_spec: TokenizerSpec


def prepare(recipe: Recipe, data_dir=None, vocabs: tuple[Vocab, Vocab] | None = None,
            max_positions: int | None = None, specs: tuple[TokenizerSpec, TokenizerSpec] | None = None,
            stop: threading.Event | None = None) -> Prepared:
    """Read, tokenize and encode; tokenizers and vocabularies come from the training split unless given (resume);
    ``PreparationStopped`` as soon as ``stop`` is set (see the module's docstring).

    A SentencePiece side learns its model from the training split's texts, and its vocabulary is every piece of
    that model (byte pieces included), so the trained model reads any input without ``<unk>``."""
    splits = load_splits(recipe.corpus, resolve_data_dir(data_dir), stop)
    src_spec, tgt_spec = specs or (recipe.src_tokenizer.trained([s for s, _ in splits.train]),
                                   recipe.tgt_tokenizer.trained([t for _, t in splits.train]))
    train_tok = [(src_spec.tokenize(s), tgt_spec.tokenize(t)) for s, t in _until_stopped(splits.train, stop)]
    val_tok = [(src_spec.tokenize(s), tgt_spec.tokenize(t)) for s, t in _until_stopped(splits.val, stop)]
    has_source = recipe.has_source
    if vocabs is None:  # a language model's one vocabulary serves as both sides
        tgt_vocab = _side_vocab(tgt_spec, (t for _, t in train_tok), recipe.min_freq)
        vocabs = (_side_vocab(src_spec, (s for s, _ in train_tok), recipe.min_freq) if has_source else tgt_vocab,
                  tgt_vocab)
    limit = (max_positions or recipe.model.get("max_positions", 100)) - 2

    def encode(pairs):  # a language model reads no source: its source ids stay empty
        return [(vocabs[0].encode(s[:limit], True) if has_source else [], vocabs[1].encode(t[:limit], True))
                for s, t in pairs if t and (s or not has_source)]

    words = tgt_spec.words()  # BLEU counts words, also for a subword model
    refs = [t for _, t in val_tok] if words is tgt_spec else [words.tokenize(t) for _, t in splits.val]
    prepared = Prepared(vocabs[0], vocabs[1], encode(train_tok), encode(val_tok), splits.val, refs, src_spec, tgt_spec)
    check_prepared(recipe.corpus, resolve_data_dir(data_dir), {"train": len(splits.train), "val": len(splits.val)},
                   {"train": len(prepared.train), "val": len(prepared.val)})
    return prepared


def _side_vocab(spec: TokenizerSpec, sentences, min_freq: int) -> Vocab:
    if spec.mode == "sentencepiece":
        return Vocab(list(SPECIALS) + [p for p in spec.pieces() if p not in SPECIALS])
    return Vocab.build(sentences, min_freq)
