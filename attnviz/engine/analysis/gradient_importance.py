"""Head importance estimated from gradients (Michel, Levy and Neubig 2019, "Are Sixteen Heads Really Better than
One?"): the expected |dL/dg| over a corpus, where g is a gate multiplying a head's output (1: on) and L the
teacher-forced cross-entropy of the reference translation. A head whose gate barely moves the loss can go.

It costs one forward and one backward pass per sentence (the absolute value is taken per sentence, as the
expectation asks), whatever the number of heads: for NLLB-600M's 576 heads that is 576 fewer corpus decodes than
switching each head off (``engine.analysis.importance``), at the price of a first-order estimate of a change in loss
rather than a measured change in BLEU. The gates are ``HeadScale`` edits of each block's ``weights`` probe point
(``engine.models.probes``), ones that require a gradient, in this thread only. Scores are normalised per layer (the
l2 norm of a layer's scores is 1), as Michel et al. do before ranking across layers; the raw means are kept too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from attnviz.engine.analysis.importance import ImportanceProgress, kinds_to_measure
from attnviz.engine.errors import InputError
from attnviz.engine.heads import NUMBERING, HeadRef
from attnviz.engine.models.probes import HeadScale, attention_point, edit, probe_names
from attnviz.engine.models.protocol import SearchModel
from attnviz.engine.text.vocab import EOS_ID, SOS_ID
from attnviz.engine.training.clock import remaining_seconds

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

FORMAT = "attnviz gradient head importance 1"


@dataclass(frozen=True)
class GradientImportance:
    """Per kind, [layers, heads] of the mean |dL/dgate| (``raw``) and the same normalised per layer (``scores``)."""

    scores: dict[str, np.ndarray]
    raw: dict[str, np.ndarray]
    sentences: int
    tokens: int  # reference tokens scored
    passes: int  # forward + backward passes made
    seconds: float
    source: str
    extra: dict[str, Any] = field(default_factory=dict)

    def ranking(self) -> list[tuple[HeadRef, float]]:
        """Every head with its normalised score, least important first (the order to switch them off in)."""
        heads = [(HeadRef(kind, layer, head), float(m[layer, head])) for kind, m in self.scores.items()
                 for layer in range(m.shape[0]) for head in range(m.shape[1])]
        return sorted(heads, key=lambda item: (item[1], item[0].kind, item[0].layer, item[0].head))

    def cost(self) -> str:
        return (f"{self.passes} forward + backward passes (one per sentence, {self.tokens} reference tokens), "
                f"{self.seconds:.1f} s")

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, **self.extra, "source": self.source, "sentences": self.sentences,
                "tokens": self.tokens, "passes": self.passes, "seconds": self.seconds, "numbering": NUMBERING,
                "method": "expected |dL/d gate| (Michel et al. 2019), normalised per layer",
                "heads": [{"kind": ref.kind, "layer": ref.layer + 1, "head": ref.head + 1, "score": score,
                           "raw": float(self.raw[ref.kind][ref.layer, ref.head])} for ref, score in self.ranking()]}


@contextmanager
def _open_gates(model: SearchModel, layout: dict[str, tuple[int, int]]) -> Iterator[dict[str, list[torch.Tensor]]]:
    """Gates of ones requiring a gradient on every measured attention block (this thread), as ``HeadScale`` edits of
    their weights; removed after."""
    offered = set(probe_names(model))
    missing = sorted(kind for kind in layout if attention_point(kind, 0, "weights") not in offered)
    if missing:
        raise InputError(f"This model cannot gate its {', '.join(missing)} heads, so they have no gradient.")
    device = next(model.parameters()).device
    gates = {kind: [torch.ones(heads, device=device, requires_grad=True) for _ in range(layers)]
             for kind, (layers, heads) in layout.items()}
    with edit(model, {attention_point(kind, i, "weights"): HeadScale(gate) for kind, row in gates.items()
                      for i, gate in enumerate(row)}):
        yield gates


def _forced_pair(translator: Translator, src: str, ref: str) -> tuple[list[int], list[int], int]:
    """Source ids, the target ids fed and predicted ([<sos>, lead..., ref..., <eos>]), and how many lead ids (a
    multilingual model's target tag) come first: they are given, not scored."""
    prepared = translator.prepare(src)
    ref_ids = translator.tgt_vocab.encode(translator.reference_tokens(ref))[:translator.model.max_target_len - 2]
    return list(prepared.src_ids), [SOS_ID, *prepared.forced, *ref_ids, EOS_ID], len(prepared.forced)


def gradient_importance_steps(translator: Translator, pairs: Sequence[tuple[str, str]], *,
                              kinds: Sequence[str] | None = None, source: str = "corpus",
                              stop: threading.Event | None = None
                              ) -> Iterator[ImportanceProgress | GradientImportance]:
    """An ``ImportanceProgress`` per sentence, then the ``GradientImportance``; a stopped run yields no result."""
    if not translator.has_source:
        raise InputError("Head importance needs a translation model; this is a language model.")
    if not pairs:
        raise InputError("The corpus has no sentences to estimate head importance on.")
    layout, model = kinds_to_measure(translator, kinds), translator.model
    totals = {kind: np.zeros(shape) for kind, shape in layout.items()}
    device, started, tokens = next(model.parameters()).device, time.perf_counter(), 0
    model.eval()
    with torch.enable_grad(), _open_gates(model, layout) as gates:
        for done, (src, ref) in enumerate(pairs, 1):
            if stop is not None and stop.is_set():
                return
            src_ids, tgt, lead = _forced_pair(translator, src, ref)
            out = model.decode(torch.tensor([tgt[:-1]], device=device),
                               model.encode(torch.tensor([src_ids], device=device)))
            logits = model.project(out.hidden)[0, lead:].float()
            loss = torch.nn.functional.cross_entropy(logits, torch.tensor(tgt[lead + 1:], device=device))
            grads = torch.autograd.grad(loss, [g for row in gates.values() for g in row])
            flat = iter(grads)
            for kind, (layers, _) in layout.items():
                totals[kind] += np.stack([next(flat).abs().cpu().numpy() for _ in range(layers)])
            tokens += len(tgt) - lead - 1
            yield ImportanceProgress(done, len(pairs), phase="gradients", unit="sentences",
                                     eta_s=remaining_seconds(time.perf_counter() - started, done, len(pairs) - done))
    raw = {kind: total / len(pairs) for kind, total in totals.items()}
    norms = {kind: np.linalg.norm(m, axis=1, keepdims=True) for kind, m in raw.items()}
    scores = {kind: np.divide(m, norms[kind], out=np.zeros_like(m), where=norms[kind] > 0) for kind, m in raw.items()}
    yield GradientImportance(scores, raw, len(pairs), tokens, len(pairs), time.perf_counter() - started, source)
