"""Head importance: the BLEU a corpus loses when one attention head alone is switched off, for every head.

``importance_steps`` decodes the corpus once with every head on (the baseline), then once per head with that head
off (``DecodeConfig.heads_off``), yielding an ``ImportanceProgress`` after each decode (with the head's score, so a
view can draw the map as it fills, and an ETA) and one ``ImportanceReady`` with every head's BLEU and its loss
(baseline - BLEU: positive when the head helps), most important first. Each loss comes with a 95% interval from a
paired bootstrap over the sentences (``engine.analysis.bootstrap``, seeded: the same corpus and outputs give the
same interval), so that a loss of a few BLEU on 20 sentences is seen to be noise. A stop event is checked between
heads: a stopped run yields nothing more. The CLI (``attnviz head-importance``) and the
Analysis tab drive the same generator; ``ImportanceReady.to_json``/``from_json`` is the saved file's format.

Torch is not imported here: the translator brings it, so the GUI can import this module at start-up.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.engine.analysis.bootstrap import Resamples, bleu_of_stats, sentence_stats
from attnviz.engine.analysis.llm_heads import distinct_kinds, importance_notes, prompt_card
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import InputError, check_on_cpu
from attnviz.engine.heads import KIND_ALIASES, NUMBERING, SHORT_NAMES, HeadRef
from attnviz.engine.training.clock import remaining_seconds

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

FORMAT = "attnviz head importance 1"


@dataclass(frozen=True)
class HeadScore:
    kind: str  # "encoder", "decoder" or "cross"
    layer: int  # 0-based
    head: int  # 0-based
    bleu: float  # bleu_tok with this head alone off
    delta: float  # baseline - bleu: the BLEU lost (negative: the corpus scores better without the head)
    interval: tuple[float, float] | None = None  # 95% bootstrap interval of delta (None: a file without one)

    def to_json(self) -> dict[str, Any]:
        out = {"kind": self.kind, "layer": self.layer + 1, "head": self.head + 1, "bleu": self.bleu,
               "delta": self.delta}
        return out | ({"delta_interval": list(self.interval)} if self.interval is not None else {})

    def clear(self) -> bool:
        """Whether the interval excludes 0: the corpus tells this head's effect from noise."""
        return self.interval is not None and (self.interval[0] > 0 or self.interval[1] < 0)

    def describe(self) -> str:
        """``+1.20 BLEU (95% interval +0.40 to +2.10)``, and whether that is distinguishable from no change."""
        if self.interval is None:
            return f"{self.delta:+.2f} BLEU"
        low, high = self.interval
        verdict = "" if self.clear() else ", not distinguishable from no change on this corpus"
        return f"{self.delta:+.2f} BLEU (95% interval {low:+.2f} to {high:+.2f}{verdict})"


@dataclass(frozen=True)
class ImportanceProgress:
    done: int  # decodes finished: the baseline, then one per head
    total: int
    phase: str = "heads off"
    unit: str = "decodes"
    head: HeadRef | None = None  # the head just measured (None: the baseline)
    score: HeadScore | None = None  # its figures, for a map drawn as it fills
    baseline: float | None = None  # bleu_tok with every head on
    eta_s: float | None = None  # the time the remaining decodes will take, at the pace so far


NOTE_KEYS = ("same_heads", "kv_heads", "query_heads_per_kv_head", "kv_groups", "prompt", "prompt_languages", "spans",
             "first_prompt")  # an LLM's notes and prompts (``llm_heads``), kept when a saved file is reopened


@dataclass(frozen=True)
class ImportanceReady:
    baseline: float  # bleu_tok with every head on
    heads: tuple[HeadScore, ...]  # most important (largest delta) first
    layout: dict[str, tuple[int, int]]  # kind -> (layers, heads) of the kinds measured
    sentences: int
    source: str
    decode: str = "greedy"
    rescale_heads: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. the model's path
    bootstrap: dict[str, Any] = field(default_factory=dict)  # how the intervals were drawn (Resamples.describe)
    sample: dict[str, int] = field(default_factory=dict)  # a random sample of heads: {"measured", "of", "seed"}

    def matrix(self, kind: str) -> np.ndarray:
        """[layers, heads] of the BLEU lost per head (NaN where a head was not measured)."""
        out = np.full(self.layout[kind], np.nan)
        for h in self.heads:
            if h.kind == kind:
                out[h.layer, h.head] = h.delta
        return out

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, **self.extra, "source": self.source, "sentences": self.sentences,
                "decode": self.decode, "rescale_heads": self.rescale_heads, "metric": "bleu_tok",
                "baseline_bleu": self.baseline, "layout": {k: list(v) for k, v in self.layout.items()},
                "numbering": NUMBERING, **({"bootstrap": self.bootstrap} if self.bootstrap else {}),
                **({"sample": self.sample} if self.sample else {}),
                "heads": [h.to_json() for h in self.heads]}

    @classmethod
    def from_json(cls, data: Any) -> ImportanceReady:
        """Read a saved file back; ``InputError`` when it is not one ``to_json`` wrote."""
        try:
            if data.get("format") != FORMAT:
                raise KeyError("format")
            layout = {KIND_ALIASES[k]: (int(v[0]), int(v[1])) for k, v in data["layout"].items()}
            heads = tuple(HeadScore(KIND_ALIASES[h["kind"]], int(h["layer"]) - 1, int(h["head"]) - 1,
                                    float(h["bleu"]), float(h["delta"]), _interval(h.get("delta_interval")))
                          for h in data["heads"])
            if any(not (0 <= h.layer < layout[h.kind][0] and 0 <= h.head < layout[h.kind][1]) for h in heads):
                raise ValueError("head outside the layout")
            return cls(float(data["baseline_bleu"]), heads, layout, int(data["sentences"]), str(data["source"]),
                       str(data.get("decode", "greedy")), bool(data.get("rescale_heads", False)),
                       extra={k: data[k] for k in NOTE_KEYS if k in data}, bootstrap=dict(data.get("bootstrap") or {}),
                       sample={k: int(v) for k, v in (data.get("sample") or {}).items()})
        except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
            raise InputError(f"This is not a head-importance file written by attnviz ({exc}); make one with "
                             "attnviz head-importance --out FILE.json or the Analysis tab.") from None


def _interval(value: Any) -> tuple[float, float] | None:
    """A saved ``delta_interval`` ([low, high]); files written before intervals have none."""
    if value is None:
        return None
    low, high = (float(v) for v in value)
    if not low <= high:
        raise ValueError("delta_interval's low end is above its high end")
    return low, high


def kinds_to_measure(translator: Translator, kinds: Sequence[str] | None) -> dict[str, tuple[int, int]]:
    """The layout of the attention kinds to measure: all the model has, or ``kinds`` (enc/dec/cross aliases)."""
    layout = dict(translator.kind.layout(translator.config))
    if not kinds:
        return distinct_kinds(translator, layout)  # an LLM's three views are one set of heads
    chosen = {}
    for name in kinds:
        kind = KIND_ALIASES.get(name.strip().lower())
        if kind is None or kind not in layout:
            have = ", ".join(SHORT_NAMES[k] for k in layout)
            raise InputError(f"Unknown or absent attention kind {name!r}: this model has {have}.")
        chosen[kind] = layout[kind]
    return distinct_kinds(translator, chosen)


def bleu_scorer(translator: Translator, pairs: Sequence[tuple[str, str]]):
    """A function ``decode -> bleu_tok`` of the corpus translated with ``decode`` (evaluate's figure, without the
    teacher-forced pass); the references are tokenized once for all the decodes."""
    from attnviz.engine.metrics import bleu_tok

    sources = [s for s, _ in pairs]
    refs = [translator.tgt_spec.words().tokenize(r) for _, r in pairs]

    def score(decode: DecodeConfig) -> float:
        hyps = translator.translate_batch_tokens(sources, decode)
        return bleu_tok([translator.tgt_spec.scored_words(h) for h in hyps], refs)[0]

    return score


def stats_scorer(translator: Translator, pairs: Sequence[tuple[str, str]]):
    """A function ``decode -> [N, stats]``: the corpus translated with ``decode``, as BLEU's per-sentence
    statistics (``engine.analysis.bootstrap``); their sum scores as ``bleu_tok`` does."""
    sources = [s for s, _ in pairs]
    refs = [translator.tgt_spec.words().tokenize(r) for _, r in pairs]

    def stats(decode: DecodeConfig):
        hyps = translator.translate_batch_tokens(sources, decode)
        return sentence_stats([translator.tgt_spec.scored_words(h) for h in hyps], refs)

    return stats


def corpus_bleu(translator: Translator, pairs: Sequence[tuple[str, str]], decode: DecodeConfig) -> float:
    """bleu_tok of the corpus translated with ``decode`` once."""
    return bleu_scorer(translator, pairs)(decode)


def sampled_heads(refs: Sequence[HeadRef], sample: int | None, seed: int) -> tuple[list[HeadRef], dict[str, int]]:
    """``sample`` heads of ``refs`` drawn at random with ``seed`` (in their order), and what the result says of
    the draw; every head (and nothing to say) when ``sample`` is None or covers them all."""
    if sample is None or sample >= len(refs):
        return list(refs), {}
    if sample < 1:
        raise InputError(f"--sample is {sample}, but it must be a number of heads from 1 to {len(refs)}.")
    chosen = set(random.Random(seed).sample(range(len(refs)), sample))
    return [ref for i, ref in enumerate(refs) if i in chosen], {"measured": sample, "of": len(refs), "seed": seed}


def importance_steps(translator: Translator, pairs: Sequence[tuple[str, str]], decode: DecodeConfig | None = None, *,
                     kinds: Sequence[str] | None = None, source: str = "corpus", stop: threading.Event | None = None,
                     sample: int | None = None, seed: int = 0) -> Iterator[ImportanceProgress | ImportanceReady]:
    """Every head of ``kinds`` (default: all) switched off alone, or a random ``sample`` of them drawn with
    ``seed`` (a 576-head NLLB model would take 577 decodes of the corpus; the result's ``sample`` says how many
    were measured, and its map leaves the others blank); ``decode``'s own ``heads_off`` are ignored."""
    check_on_cpu(translator, "Head importance")
    if not translator.has_source:
        raise InputError("Head importance is measured in BLEU, which needs a translation model; this is a "
                         "language model.")
    if not pairs:
        raise InputError("The corpus has no sentences to measure head importance on.")
    decode = (decode or DecodeConfig()).replace(heads_off=())
    layout = kinds_to_measure(translator, kinds)
    refs, drawn = sampled_heads([HeadRef(k, la, h) for k, (layers, heads) in layout.items()
                                 for la in range(layers) for h in range(heads)], sample, seed)
    total = len(refs) + 1
    stats_of, resamples = stats_scorer(translator, pairs), Resamples.draw(len(pairs))
    started = time.perf_counter()
    base_stats = stats_of(decode)
    baseline = float(bleu_of_stats(base_stats.sum(0)))
    yield ImportanceProgress(1, total, baseline=baseline,
                             eta_s=remaining_seconds(time.perf_counter() - started, 1, total - 1))
    scores = []
    for done, ref in enumerate(refs, 2):
        if stop is not None and stop.is_set():
            return
        off_stats = stats_of(decode.replace(heads_off=(ref,)))
        bleu = float(bleu_of_stats(off_stats.sum(0)))
        score = HeadScore(ref.kind, ref.layer, ref.head, bleu, baseline - bleu,
                          resamples.delta_interval(base_stats, off_stats))
        scores.append(score)
        yield ImportanceProgress(done, total, head=ref, score=score, baseline=baseline,
                                 eta_s=remaining_seconds(time.perf_counter() - started, done, total - done))
    scores.sort(key=lambda s: (-s.delta, s.kind, s.layer, s.head))
    yield ImportanceReady(baseline, tuple(scores), layout, len(pairs), source,
                          f"beam {decode.beam}" if decode.beam > 1 else "greedy", decode.rescale_heads,
                          extra={**importance_notes(translator), **prompt_card(translator, [s for s, _ in pairs])},
                          bootstrap=resamples.describe(), sample=drawn)


def compute_importance(translator: Translator, pairs, decode: DecodeConfig | None = None,
                       kinds: Sequence[str] | None = None) -> ImportanceReady:
    """The result without progress (tests, scripts)."""
    for event in importance_steps(translator, pairs, decode, kinds=kinds):
        if isinstance(event, ImportanceReady):
            return event
    raise RuntimeError("head importance ended without a result")
