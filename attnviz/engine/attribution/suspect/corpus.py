"""The suspect-translation score of one sentence and the ranking of a corpus (``suspect``), as a generator of typed
events with a stop check between sentences: what the Analysis tab's worker runs and the CLI or scripts can drive.

Each sentence is translated greedily (every attention row kept), its ALTI+ source share computed on the output
(where the model's kind has ALTI+), and its components read (``suspect.components``); the ranking reads the model's
calibration where it has one (``suspect.store``), and says when it has none. The corpus is read as the
other analysis jobs read theirs (``analysis.jobs.read_corpus``: a split of the model's corpus, or text files).
Torch loads only when a job runs.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING

from attnviz.engine.attribution.base import AttributionProgress, get_method
from attnviz.engine.attribution.suspect.components import SPAN_SHORT, components, prompt_span
from attnviz.engine.attribution.suspect.rank import SuspectRanking, SuspectRow
from attnviz.engine.attribution.suspect.store import calibration_of
from attnviz.engine.errors import InputError, check_on_cpu
from attnviz.engine.events import Translation

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator


def decoded_with_progress(translator: Translator, sources: Sequence[str], stop: threading.Event | None = None
                          ) -> Generator[AttributionProgress, None, list | None]:
    """Every source translated in batches, a progress event per batch; returns the decoded examples, or None once
    ``stop`` is set."""
    from attnviz.engine.attribution.suspect.batch import decoded

    n, found = len(sources), []
    yield AttributionProgress(0, n, "decoding", "sentences")
    for item in decoded(translator, sources):
        if stop is not None and stop.is_set():
            return None
        if isinstance(item, int):
            yield AttributionProgress(item, n, "decoding", "sentences")
        else:
            found = item
    return found


def has_alti(translator: Translator) -> bool:
    """Whether ALTI+ is defined for the model's kind (asked through the registry, which lists the methods in their
    modules' order)."""
    return get_method("alti-plus").defined_for(translator)


def suspect_sentence(translator: Translator, text: str) -> tuple[Translation, dict[str, float]]:
    """The greedy translation of ``text`` and its suspect-score components."""
    check_on_cpu(translator, "The suspect score")
    if not translator.has_source:
        raise InputError("The suspect-translation score reads a translation's source; a language model has none.")
    translation = translator.translate(text)
    return translation, translation_components(translator, translation)


def translation_components(translator: Translator, translation: Translation) -> dict[str, float]:
    """The suspect-score components of a translation already decoded (greedy or beam): ALTI+'s source share from
    one teacher-forced pass on its output where the model's kind has ALTI+, NaN where it has not (an LLM: ALTI's
    share of the prompt's sentence span)."""
    from attnviz.engine.attribution.mixing.methods import sentence_alti

    share = None
    if has_alti(translator) and translation.tokens:
        maps = sentence_alti(translator, translation.src_tokens, translation.tokens)
        share = maps.span_share(prompt_span(translation.src_tokens, translation.roles))
    return components(translation, share)


def prompt_spans(translator: Translator, sources: Sequence[str]) -> list[tuple[int, int] | None] | None:
    """Each sentence's span in its prompt for a kind that reads one (None otherwise)."""
    if not translator.kind.reads_prompt:
        return None
    return [prompt_span(found.src_tokens, found.roles) for found in map(translator.prepare, sources)]


def suspect_steps(translator: Translator, sources: Sequence[str], references: Sequence[str] | None = None, *,
                  corpus: str = "", stop: threading.Event | None = None
                  ) -> Iterator[AttributionProgress | SuspectRanking]:
    """Progress (decoding in batches, then scoring), then the ``SuspectRanking`` of every sentence; nothing more
    once ``stop`` is set. An empty source line raises ``InputError`` naming it (as the other analysis jobs)."""
    from attnviz.engine.attribution.suspect.batch import batch_components

    check_on_cpu(translator, "The suspect score")
    if not translator.has_source:
        raise InputError("The suspect-translation score reads a translation's source; a language model has none.")
    examples = yield from decoded_with_progress(translator, sources, stop)
    if examples is None:
        return
    n = len(sources)
    with_alti = has_alti(translator)
    rows = []
    spans = prompt_spans(translator, sources)
    for done, (i, output, found) in enumerate(batch_components(translator, examples, with_alti, spans), 1):
        rows.append(SuspectRow(i + 1, sources[i], output, found,
                               reference=references[i] if references is not None else None))
        if done % 8 == 0 or done == n:
            if stop is not None and stop.is_set():
                return
            yield AttributionProgress(done, n, "scoring", "sentences")
    calibration, where = calibration_of(translator)
    notes: tuple[str, ...] = (where,) if calibration is None and where != "not calibrated" else ()  # unusable one
    notes += () if with_alti else (f"ALTI+ is not defined for a {translator.kind.title}: the ranking leaves its "
                                   "source share out",)
    notes += (SPAN_SHORT,) if spans is not None else ()
    yield SuspectRanking.of(rows, corpus, notes, calibration, where)


def suspect_job(translator: Translator, corpus: tuple[str | None, str | None, str | None], limit: int,
                stop: threading.Event | None = None, data_dir: str | None = None
                ) -> Iterator[AttributionProgress | SuspectRanking]:
    """Worker job: the corpus choice of the Analysis tab (a split, or text files) ranked by suspicion."""
    from attnviz.engine.analysis.jobs import read_corpus

    if not translator.has_source:
        raise InputError("The suspect-translation score reads a translation's source; a language model has none.")
    split, src, _ = corpus
    sources, references, _ = read_corpus(translator, corpus, limit, data_dir)
    name = src.rsplit("/", 1)[-1] if src else f"{split or 'val'} split"
    yield from suspect_steps(translator, sources, references, corpus=name, stop=stop)
