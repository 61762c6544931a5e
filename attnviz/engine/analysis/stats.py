"""Head statistics: what each layer x head of every attention kind does on average over a corpus.

``row_statistics`` turns a batch of attention [B, L, H, Tq, Tk] into per-sentence sums of per-row figures (over
real query rows only); ``HeadStats`` holds the per-sentence means [N, L, H] of a whole corpus and derives the
corpus means (weighted by rows), the descriptive tags and each head's most typical and most unusual sentences.
Figures (every one a mean over query rows):

- ``entropy``: row entropy in nats; ``norm_entropy``: entropy / log(number of keys the row may see) in 0..1;
- ``max_weight``: the row's largest weight;
- ``sos``, ``eos``, ``punct``: weight on ``<sos>`` (and the language tags that start a sentence in multilingual
  models: NLLB's ``deu_Latn``, M2M100's ``__de__``, mBART's ``de_DE``), ``<eos>`` (an imported model's ``</s>``)
  and punctuation keys; ``sink``: their sum;
- ``same``, ``prev``, ``next``: weight on the key at the query's own position, one before and one after
  (self-attention kinds only, NaN for cross-attention);
- ``diag_distance``: cross-attention only, the expected distance in source tokens between the attended key and
  the diagonal (query i of T maps to source position i (S - 1) / (T - 1), specials counted).

Tags come from the thresholds in ``analysis.names`` (stated in the GUI and the CLI's JSON). Names: B batch, L
layers, H heads, N sentences, Tq queries, Tk keys, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from attnviz.engine.analysis.names import (
    ALIGNING_PEAK,
    ALIGNING_SINK,
    CROSS_ONLY,
    DIFFUSE_ENTROPY,
    POSITIONAL_SHARE,
    PROXY,
    SELF_ONLY,
    SINK_SHARE,
    THRESHOLDS,
    is_language_tag,
)
from attnviz.engine.analysis.sinks import is_punctuation
from attnviz.engine.heads import NUMBERING, numbered
from attnviz.engine.text.vocab import EOS_ID, PAD_ID, SOS_ID, Vocab


def punctuation_table(vocab: Vocab) -> Tensor:
    """[V] bool, True at punctuation tokens."""
    return torch.tensor([is_punctuation(vocab.token(i)) for i in range(len(vocab))], dtype=torch.bool)


def start_table(vocab: Vocab) -> Tensor:
    """[V] bool, True at the tokens counted with ``<sos>``: ``<sos>`` itself and language tags."""
    return torch.tensor([i == SOS_ID or is_language_tag(vocab.token(i)) for i in range(len(vocab))],
                        dtype=torch.bool)


def _shifted_diagonal(attn: Tensor, offset: int) -> Tensor:
    """Weight of query i on key i + offset: [B, L, H, Tq] (0 where that key does not exist)."""
    out = attn.new_zeros(attn.shape[:-1])
    diag = attn.diagonal(offset=offset, dim1=-2, dim2=-1)  # [B, L, H, Tq - |offset|]
    if offset >= 0:
        out[..., : diag.size(-1)] = diag
    else:
        out[..., -offset: -offset + diag.size(-1)] = diag
    return out


def _diagonal_distance(attn: Tensor, qmask: Tensor, kmask: Tensor) -> Tensor:
    """Expected |key - diagonal| per row, [B, L, H, Tq]."""
    s = kmask.sum(-1).float().clamp(min=1)  # [B]
    t = qmask.sum(-1).float()  # [B]
    i = torch.arange(attn.size(-2), dtype=torch.float32)
    j = torch.arange(attn.size(-1), dtype=torch.float32)
    diag = i[None] * ((s - 1) / (t - 1).clamp(min=1))[:, None]  # [B, Tq]
    dist = (j[None, None] - diag[..., None]).abs()  # [B, Tq, Tk]
    return (attn * dist[:, None, None]).sum(-1)


def row_statistics(attn: Tensor, qmask: Tensor, key_ids: Tensor, punct: Tensor, kind: str,
                   starts: Tensor | None = None, seen: Tensor | None = None) -> tuple[dict[str, Tensor], Tensor]:
    """Per-sentence sums over real query rows of every figure: stat -> [B, L, H], and rows per sentence [B].

    ``attn`` [B, L, H, Tq, Tk] (rows sum to 1 over real keys), ``qmask`` [B, Tq] real queries, ``key_ids`` [B, Tk]
    (PAD_ID where there is no key), ``punct`` [V] bool, ``starts`` [V] bool: the keys counted as ``sos``
    (``start_table``; ``<sos>`` alone when None), ``seen`` [B, L, Tq, Tk] the keys each row may see where they
    differ by layer (a sliding window: ``llm_heads.prompt_rows``). Self-attention kinds must have Tq == Tk.
    """
    attn = attn.float()
    kmask = key_ids != PAD_ID  # [B, Tk]
    if seen is None and kind == "decoder":  # causal: query i sees keys 0..i
        seen = (kmask[:, None, :] & torch.ones(attn.size(-2), attn.size(-1), dtype=torch.bool).tril()[None])[:, None]
    elif seen is None:
        seen = kmask[:, None, None, :].expand(-1, 1, attn.size(-2), -1)  # [B, 1, Tq, Tk]
    n_keys = seen.sum(-1).float()[:, :, None]  # [B, L or 1, 1, Tq]
    plogp = torch.where(attn > 0, attn * attn.clamp(min=1e-30).log(), torch.zeros_like(attn))
    entropy = -plogp.sum(-1)  # [B, L, H, Tq]
    share = {name: (attn * m[:, None, None, None, :].float()).sum(-1)
             for name, m in (("sos", key_ids == SOS_ID if starts is None else starts[key_ids]),
                             ("eos", key_ids == EOS_ID), ("punct", punct[key_ids]))}
    rows = {"entropy": entropy, "norm_entropy": entropy / n_keys.clamp(min=2).log(),
            "max_weight": attn.max(-1).values, **share, "sink": share["sos"] + share["eos"] + share["punct"]}
    nan = torch.full_like(entropy, math.nan)
    if kind == "cross":
        rows.update(same=nan, prev=nan, next=nan, diag_distance=_diagonal_distance(attn, qmask, kmask))
    else:
        rows.update(same=_shifted_diagonal(attn, 0), prev=_shifted_diagonal(attn, -1), next=_shifted_diagonal(attn, 1),
                    diag_distance=nan)
    q = qmask[:, None, None, :].float()  # [B, 1, 1, Tq]
    return {name: (v * q).sum(-1) for name, v in rows.items()}, qmask.sum(-1)


def head_tags(kind: str, values: dict[str, float]) -> tuple[str, ...]:
    """Descriptive tags of one head from its corpus means (see the thresholds above)."""
    tags = []
    if kind != "cross" and max(values["same"], values["prev"], values["next"]) >= POSITIONAL_SHARE:
        tags.append("positional")
    if values["sink"] >= SINK_SHARE:
        tags.append("sink")
    if values["norm_entropy"] >= DIFFUSE_ENTROPY:
        tags.append("diffuse")
    if kind == "cross" and values["max_weight"] >= ALIGNING_PEAK and values["sink"] < ALIGNING_SINK:
        tags.append("aligning")
    return tuple(tags)


@dataclass(frozen=True)
class HeadStats:
    """Statistics of every head over a corpus of N sentences (numpy, safe to pass between threads)."""

    sentences: tuple[str, ...]  # the corpus sources (a language model: its texts), N
    per_sentence: dict[str, dict[str, np.ndarray]]  # kind -> stat -> per-sentence mean over rows [N, L, H]
    rows: dict[str, np.ndarray]  # kind -> query rows per sentence [N]
    targets: str = "greedy"  # which targets were teacher-forced: "greedy" or "reference"
    notes: dict = field(default_factory=dict)  # what the figures are over, where a kind differs (``llm_heads``)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self.per_sentence)

    def layout(self, kind: str) -> tuple[int, int]:
        return self.per_sentence[kind]["entropy"].shape[1:]

    def means(self, kind: str) -> dict[str, np.ndarray]:
        """Corpus means weighted by rows: stat -> [L, H]."""
        w = self.rows[kind].astype(np.float64)[:, None, None]
        total = max(float(w.sum()), 1.0)
        out = {name: (np.nan_to_num(v) * w).sum(0) / total for name, v in self.per_sentence[kind].items()}
        absent = self.notes.get("not_applicable", {}).get(kind, ())  # e.g. an LLM's prompt has no diagonal
        for name in (*(SELF_ONLY if kind == "cross" else CROSS_ONLY), *absent):
            out[name] = np.full_like(out[name], np.nan)
        out["alignment_proxy"] = out["max_weight"] * (1 - out["sink"]) if kind == "cross" else \
            np.full_like(out["sink"], np.nan)
        return out

    def table(self) -> list[dict]:
        """One row per head: kind, layer, head (from 0), every statistic (None where it does not apply), tags."""
        out = []
        for kind in self.kinds:
            means = self.means(kind)
            layers, heads = self.layout(kind)
            for layer in range(layers):
                for head in range(heads):
                    values = {k: float(v[layer, head]) for k, v in means.items()}
                    row = {"kind": kind, "layer": layer, "head": head}
                    row.update({k: None if math.isnan(v) else round(v, 4) for k, v in values.items()})
                    row["tags"] = list(head_tags(kind, values))
                    out.append(row)
        return out

    def typical(self, kind: str, layer: int, head: int, k: int = 5) -> tuple[list[int], list[int]]:
        """Indices of the ``k`` most typical and the ``k`` most unusual sentences for one head: distance of the
        sentence's figures from the corpus means, each figure scaled by its spread over sentences."""
        figures = [v[:, layer, head] for name, v in self.per_sentence[kind].items()
                   if not np.isnan(v).all() and name != "sink"]
        x = np.stack(figures, axis=1)  # [N, F]
        keep = self.rows[kind] > 0
        spread = x[keep].std(0) + 1e-6
        dist = np.sqrt((((x - x[keep].mean(0)) / spread) ** 2).sum(1))
        dist[~keep] = np.nan
        order = [int(i) for i in np.argsort(dist) if keep[i]]
        return order[:k], order[::-1][:k]

    def to_json(self) -> dict:
        """What ``attnviz heads --json`` prints: heads numbered as everywhere else (``NUMBERING``)."""
        return {"sentences": len(self.sentences), "targets": self.targets, "thresholds": THRESHOLDS,
                "proxy": PROXY, "numbering": NUMBERING, **self.notes,
                "heads": [numbered(row) for row in self.table()]}


def compare_stats(a: HeadStats, b: HeadStats) -> list[dict]:
    """Per-head difference b - a of every statistic, for the kinds both have with the same layers x heads (layer
    and head from 0, as ``table``)."""
    out = []
    for kind in a.kinds:
        if kind not in b.kinds or a.layout(kind) != b.layout(kind):
            continue
        ma, mb = a.means(kind), b.means(kind)
        layers, heads = a.layout(kind)
        for layer in range(layers):
            for head in range(heads):
                row = {"kind": kind, "layer": layer, "head": head}
                for name in ma:
                    d = float(mb[name][layer, head] - ma[name][layer, head])
                    row[name] = None if math.isnan(d) else round(d, 4)
                out.append(row)
    return out
