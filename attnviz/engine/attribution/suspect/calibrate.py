"""Calibrating the suspect score on a model's own held-out sentences, as a generator of typed events with a stop
check between batches: what ``attnviz calibrate`` and the benchmark drive.

Each sentence is translated greedily; then five pairs per sentence are scored teacher-forced in batches
(``suspect.batch``): two good ones, the model's own translation and the human reference, and three wrong
ones built from the model's own outputs, as hallucinations look (Guerreiro et al. 2023 build theirs the same way):
the translation of another sentence (half the corpus away), the own translation with its second half replaced by
the second half of that other translation, and the first half of the own translation said three times. The scored
pairs are fitted (``suspect.fit``) into a ``Calibration``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from attnviz.engine.attribution.base import AttributionProgress
from attnviz.engine.attribution.suspect.fit import fit
from attnviz.engine.attribution.suspect.rule import Calibration
from attnviz.engine.errors import InputError
from attnviz.engine.text.vocab import EOS_ID, SOS_ID

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

COPIES = 3  # the repetition pair says the first half of the translation this many times
NO_SOURCE = "The suspect score reads a translation's source; a language model has none to calibrate."


def _body(tgt: Sequence[int]) -> tuple[int, ...]:
    """A target's tokens without ``<sos>`` and a closing ``<eos>``."""
    inner = tuple(tgt[1:])
    return inner[:-1] if inner and inner[-1] == EOS_ID else inner


def wrong_pairs(own: Sequence[int], other: Sequence[int], longest: int) -> dict[str, tuple[int, ...]]:
    """The three wrong targets built from a sentence's ``own`` translation and ``other``, another sentence's (each
    ``<sos>`` .. ``<eos>``), at most ``longest`` tokens between them; a pair equal to the own one is left out."""
    mine, theirs = _body(own), _body(other)
    half = (len(mine) + 1) // 2
    built = {"other sentence": theirs, "half replaced": mine[:half] + theirs[len(theirs) // 2:],
             "repetition": mine[:max(1, half)] * COPIES}
    return {kind: (SOS_ID, *body[:longest], EOS_ID) for kind, body in built.items() if body and body != mine}


def calibration_pairs(own: Sequence, references: Sequence, longest: int) -> list[tuple[str, int, tuple[int, ...]]]:
    """(kind, sentence index, target ids) of every pair: the own translation and the reference of each sentence,
    then its wrong pairs against the sentence half the corpus away."""
    n, out = len(own), []
    for i in range(n):
        out += [("own translation", i, own[i].tgt), ("human reference", i, references[i].tgt)]
        other = own[(i + n // 2) % n].tgt
        if n > 1 and _body(other) != _body(own[i].tgt):
            out += [(kind, i, tgt) for kind, tgt in wrong_pairs(own[i].tgt, other, longest).items()]
    return out


def scored_pairs(translator: Translator, sources: Sequence[str], references: Sequence[str],
                 stop: threading.Event | None = None) -> Iterator[AttributionProgress | list[tuple[str, dict]]]:
    """Progress (decoding, then scoring the pairs), then every pair's (kind, components); nothing more once
    ``stop`` is set."""
    from attnviz.engine.analysis.corpus import Example, encode_corpus
    from attnviz.engine.attribution.suspect.batch import batch_components
    from attnviz.engine.attribution.suspect.corpus import decoded_with_progress, has_alti

    if not translator.has_source:
        raise InputError(NO_SOURCE)
    if len(references) != len(sources):
        raise InputError(f"Calibrating needs a human reference for every sentence: {len(sources)} sentences, "
                         f"{len(references)} references.")
    own = yield from decoded_with_progress(translator, sources, stop)
    if own is None:
        return
    refs = encode_corpus(translator, sources, references)
    pairs = calibration_pairs(own, refs, translator.model.max_target_len - 2)
    examples = [Example(own[i].src, tgt) for _, i, tgt in pairs]
    rows: list[tuple[str, dict]] = [("", {})] * len(pairs)
    for done, (index, _, found) in enumerate(batch_components(translator, examples, has_alti(translator)), 1):
        rows[index] = (pairs[index][0], found)
        if done % 32 == 0 or done == len(pairs):
            if stop is not None and stop.is_set():
                return
            yield AttributionProgress(done, len(pairs), "scoring", "pairs")
    yield rows


def calibration_steps(translator: Translator, sources: Sequence[str], references: Sequence[str], *, corpus: str,
                      stop: threading.Event | None = None) -> Iterator[AttributionProgress | Calibration]:
    """The progress of ``scored_pairs``, then the ``Calibration`` fitted to them."""
    for event in scored_pairs(translator, sources, references, stop):
        if isinstance(event, AttributionProgress):
            yield event
        else:
            yield fit(event, f"{corpus}, {len(sources)} sentences", str(translator.metadata.get("name", "")))


def calibration_job(translator: Translator, split: str | None, src: str | None, ref: str | None, limit: int,
                    stop: threading.Event | None = None, data_dir: str | None = None
                    ) -> Iterator[AttributionProgress | Calibration]:
    """A split of the model's corpus (its validation split by default), or a source file and its references,
    calibrated (``calibration_steps``)."""
    from attnviz.engine.analysis.run import corpus_pairs

    if not translator.has_source:
        raise InputError(NO_SOURCE)
    if bool(src) != bool(ref):
        raise InputError("Calibrating needs the source file and its references together: give --src and --ref.")
    sources, references = corpus_pairs(translator, split or "val", src, ref, limit, data_dir)
    if references is None:
        raise InputError("Calibrating needs human references: choose a split of the model's corpus, or give --ref.")
    corpus = f"{_file_name(src)} / {_file_name(ref)}" if src else f"{split or 'val'} split"
    yield from calibration_steps(translator, sources, references, corpus=corpus, stop=stop)


def _file_name(path: str | None) -> str:
    return (path or "").replace("\\", "/").rsplit("/", 1)[-1]
