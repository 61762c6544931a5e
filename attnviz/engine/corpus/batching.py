"""Batches for training and evaluation: length buckets under a sentence count or a token budget.

Bucketing sorts a shuffled corpus by length so each batch holds sentences of similar length (little padding), then
shuffles the order of the batches. The order depends only on the seed, so a resumed run sees the same batches.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch
from torch import Tensor

from attnviz.engine.config import TrainConfig
from attnviz.engine.text.vocab import PAD_ID


def pad_batch(sequences: Sequence[Sequence[int]]) -> Tensor:
    """Right-pad id lists with PAD_ID into a [B, S] tensor."""
    width = max(len(s) for s in sequences)
    return torch.tensor([list(s) + [PAD_ID] * (width - len(s)) for s in sequences], dtype=torch.long)


def make_batches(lengths: Sequence[tuple[int, int]], cfg: TrainConfig, seed: int, shuffle: bool = True
                 ) -> list[list[int]]:
    """Group example indices into batches; ``lengths`` are (source, target) token counts."""
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    if shuffle:
        rng.shuffle(order)
    if cfg.bucket or not shuffle:
        order.sort(key=lambda i: (lengths[i][0], lengths[i][1]))  # stable: ties keep the shuffled order
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        width = max(longest, *lengths[i])
        full = (len(current) + 1) * width * 2 > cfg.max_tokens if cfg.max_tokens else len(current) >= cfg.batch_size
        if current and full:
            batches.append(current)
            current, width = [], max(lengths[i])
        current.append(i)
        longest = width
    if current:
        batches.append(current)
    if shuffle and cfg.bucket:
        rng.shuffle(batches)
    return batches


def eval_batches(examples: Sequence[tuple[Sequence[int], Sequence[int]]], batch_size: int = 128):
    """Padded (source, target) tensors over ``examples`` in length order, for evaluation (no shuffling)."""
    lengths = [(len(s), len(t)) for s, t in examples]
    for batch in make_batches(lengths, TrainConfig(batch_size=batch_size), seed=0, shuffle=False):
        yield batch_tensors([examples[i] for i in batch])


def batch_tensors(examples: Sequence[tuple[Sequence[int], Sequence[int]]]) -> tuple[Tensor, Tensor]:
    """(source ids, target ids) pairs -> padded [B, S] and [B, T] tensors."""
    return pad_batch([s for s, _ in examples]), pad_batch([t for _, t in examples])

