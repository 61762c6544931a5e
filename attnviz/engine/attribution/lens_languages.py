"""The logit lens over a corpus, by language: per decoder layer, the share of output steps whose top token (the layer's
most probable next token, read through the output projection as if the layer were the last) is English, German,
French, of another script, or not judged. Asked of a German->French model (or an LLM told to translate German into
French), a high English share in the middle layers is what the logit-lens papers call an English pivot.

Each sentence is translated greedily (as ``attnviz translate`` does), then teacher-forced once through every decoder
layer (``logit_lens_steps`` with one top token). The steps counted are those whose chosen token is a word piece: the
end-of-sentence step (a special token) is left out, as are sentences too long for the model (said, with why). The
language of a token is a heuristic guess (``engine.text.token_language``), and the result says so. Shares are counts
over all counted steps of all sentences, so a long sentence weighs more than a short one; each layer's shares sum to
1 over ``LANGUAGES``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.engine.attribution.base import AttributionProgress
from attnviz.engine.attribution.logit_lens import LogitLens, lens_not_defined, logit_lens_steps
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import InputError, check_on_cpu
from attnviz.engine.text.token_language import HEURISTIC, LANGUAGE_LABELS, LANGUAGES

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

MAX_SKIPS_SAID = 5  # the sentences left out that the result names (all are counted)


@dataclass(frozen=True)
class LensLanguages:
    """Per decoder layer, how many counted output steps had a top token of each language (``counts`` [L, 5], the
    columns in ``LANGUAGES`` order), over ``sentences`` sentences and ``steps`` counted steps."""

    counts: np.ndarray  # [L, len(LANGUAGES)] int
    sentences: int  # sentences read
    steps: int  # output steps counted (the same for every layer)
    readout: str
    settings: dict[str, Any] = field(default_factory=dict)  # the model, the languages, the corpus: how to redo it
    skipped: tuple[str, ...] = ()  # why sentences were left out (the first few)
    stopped: bool = False  # the user stopped the run: the counts are those of the sentences read so far

    @property
    def layers(self) -> int:
        return self.counts.shape[0]

    def shares(self) -> np.ndarray:
        """[L, len(LANGUAGES)]: each layer's counts over its total (each row sums to 1; zeros when no step
        counted)."""
        totals = self.counts.sum(1, keepdims=True)
        return np.divide(self.counts, totals, out=np.zeros(self.counts.shape), where=totals > 0)

    def table(self) -> list[dict[str, Any]]:
        """One row per decoder layer (from 1): the share of each language."""
        shares = self.shares()
        return [{"layer": layer + 1, **{lang: float(shares[layer, i]) for i, lang in enumerate(LANGUAGES)}}
                for layer in range(self.layers)]

    def to_json(self) -> dict[str, Any]:
        return {"method": "logit-lens languages", "readout": self.readout, "language_guess": HEURISTIC,
                "languages": {lang: LANGUAGE_LABELS[lang] for lang in LANGUAGES}, "sentences": self.sentences,
                "steps_counted": self.steps, "stopped": self.stopped, "skipped": list(self.skipped),
                "settings": self.settings, "layers": [row | {"counts": self.counts[row["layer"] - 1].tolist()}
                                                      for row in self.table()]}

    def csv_text(self) -> str:
        """The table as CSV: layer, then each language's share (6 digits), then each language's count."""
        head = ["layer", *(f"share_{lang}" for lang in LANGUAGES), *(f"count_{lang}" for lang in LANGUAGES)]
        lines = [",".join(head)]
        shares = self.shares()
        for layer in range(self.layers):
            lines.append(",".join([str(layer + 1), *(f"{v:.6f}" for v in shares[layer]),
                                   *(str(int(c)) for c in self.counts[layer])]))
        return "\n".join(lines) + "\n"


def lens_language_steps(translator: Translator, sentences: Sequence[str], decode: DecodeConfig | None = None,
                        settings: dict[str, Any] | None = None,
                        stop: threading.Event | None = None) -> Iterator[AttributionProgress | LensLanguages]:
    """A progress event per sentence, then the ``LensLanguages`` of ``sentences`` translated with ``decode``
    (default greedy; those read so far, ``stopped``, when ``stop`` is set)."""
    check_on_cpu(translator, "The logit lens")
    why = lens_not_defined(translator)
    if why is not None:
        raise InputError(f"The logit lens is not defined for a {translator.kind.title}: {why}")
    if not sentences:
        raise InputError("The corpus has no sentences: give a file with one sentence per line.")
    layers = translator.config.dec_layers
    counts = np.zeros((layers, len(LANGUAGES)), dtype=np.int64)
    read, steps, skips, readout = 0, 0, 0, ""
    skipped: list[str] = []
    for n, sentence in enumerate(sentences, 1):
        if stop is not None and stop.is_set():
            break
        try:
            lens = _lens(translator, sentence, decode or DecodeConfig())
        except InputError as exc:
            skips += 1
            if len(skipped) < MAX_SKIPS_SAID:
                skipped.append(f"line {n}: {exc}")
        else:
            counts += lens.language_counts()
            steps += int(lens.counted_steps().sum())
            readout, read = lens.readout, read + 1
        yield AttributionProgress(n, len(sentences), "logit lens", "sentences")
    if skips > len(skipped):
        skipped.append(f"and {skips - len(skipped)} more")
    yield LensLanguages(counts, read, steps, readout or "the output projection", dict(settings or {}),
                        tuple(skipped), stop is not None and stop.is_set())


def _lens(translator: Translator, sentence: str, decode: DecodeConfig) -> LogitLens:
    """One sentence's greedy translation read by the lens (its top token per layer and step)."""
    translator.refuse_beyond_positions(sentence, "a logit lens")
    translation = translator.translate(sentence, decode)
    if not translation.tokens:
        raise InputError("the translation is empty")
    *_, lens = logit_lens_steps(translator, translation.src_tokens, translation.tokens, top_k=1)
    if not isinstance(lens, LogitLens):
        raise RuntimeError("the logit lens ended without a result")
    return lens
