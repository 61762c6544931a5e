"""Metrics: masked loss, perplexity and token accuracy, and BLEU/chrF through sacreBLEU.

Two BLEU flavours, both reported with sacreBLEU's signature:
- ``bleu_tok``: corpus BLEU-4 on lowercased tokens joined by spaces with ``tokenize='none'``; the number the
  reference recipes publish (36.52 for reference A).
- ``sacrebleu``: detokenized, cased text with the standard 13a tokenizer, comparable across papers; plus chrF.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from sacrebleu.metrics import BLEU, CHRF
from torch import Tensor

from attnviz.engine.models.protocol import SearchModel
from attnviz.engine.text.vocab import PAD_ID


@dataclass
class TokenStats:
    """Sums over target tokens (pad excluded), so batches of any size add up exactly."""

    loss_sum: float = 0.0
    correct: int = 0
    tokens: int = 0

    def add(self, logits: Tensor, gold: Tensor) -> None:
        """``logits`` [B, T, V], ``gold`` [B, T] with PAD_ID where there is no token."""
        mask = gold != PAD_ID
        self.loss_sum += F.cross_entropy(logits.flatten(0, 1).float(), gold.flatten(), ignore_index=PAD_ID,
                                         reduction="sum").item()
        self.correct += int(((logits.argmax(-1) == gold) & mask).sum())
        self.tokens += int(mask.sum())

    @property
    def loss(self) -> float:
        return self.loss_sum / max(self.tokens, 1)

    @property
    def ppl(self) -> float:
        return math.exp(min(self.loss, 50.0))

    @property
    def accuracy(self) -> float:
        return self.correct / max(self.tokens, 1)


def smoothed_loss(logits: Tensor, gold: Tensor, smoothing: float) -> Tensor:
    """Mean cross-entropy over non-pad tokens, with label smoothing spread over every class (torch's definition)."""
    return F.cross_entropy(logits.flatten(0, 1).float(), gold.flatten(), ignore_index=PAD_ID, label_smoothing=smoothing)


def bleu_tok(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> tuple[float, str]:
    """Corpus BLEU on token lists (already lowercased): (score, sacreBLEU signature)."""
    metric = BLEU(tokenize="none", force=True)
    score = metric.corpus_score([" ".join(h) for h in hypotheses], [[" ".join(r) for r in references]])
    return score.score, str(metric.get_signature())


def sacrebleu_detok(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, str]:
    """Standard cased sacreBLEU (13a tokenizer) on detokenized text: (score, signature)."""
    metric = BLEU()
    return metric.corpus_score(list(hypotheses), [list(references)]).score, str(metric.get_signature())


def chrf(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, str]:
    metric = CHRF()
    return metric.corpus_score(list(hypotheses), [list(references)]).score, str(metric.get_signature())


@torch.inference_mode()
def teacher_forced_stats(model: SearchModel, batches: Iterable[tuple[Tensor, Tensor]],
                         device: torch.device) -> TokenStats:
    """Loss, PPL and accuracy of a model over ``(src, tgt)`` id batches, pad masked."""
    model.eval()
    stats = TokenStats()
    for src, tgt in batches:
        src, tgt = src.to(device), tgt.to(device)
        stats.add(model(src, tgt[:, :-1]), tgt[:, 1:])
    return stats
