"""Decoding caches that search reorders without copying what does not change: the rows-per-sentence bookkeeping
(``hyps``, ``grouping``) and the self-attention key/value buffers that grow in place (``grow_in_place``,
``select_rows``).

A beam search holds several hypotheses (rows) per sentence. What the encoder gave a sentence (cross-attention keys
and values, its mask) is kept once per sentence: row ``r`` decodes sentence ``r // hyps``, and attention reads the
sentence's tensors with its hypotheses' queries side by side (``grouped``) instead of copying them per row at every
step. A selection that keeps every sentence's rows together, in sentence order, only changes ``hyps``; any other
(greedy search dropping finished sentences) gathers the sentence tensors per row, as before. Self-attention keys
and values live in a buffer [N, H, capacity, dh] written at the step's position: a step copies nothing it already
has; the capacity doubles when full, up to the model's length limit.
"""

from __future__ import annotations

import torch
from torch import Tensor

MIN_CAPACITY = 16  # positions a fresh self-attention buffer holds


def grouping(index: Tensor, sentences: int, hyps: int) -> int | None:
    """Rows per sentence after selecting ``index`` from a cache with ``hyps`` rows for each of ``sentences``
    sentences, when the new rows keep each sentence's hypotheses together and in sentence order; else None."""
    rows = index.numel()
    if rows == 0 or rows % sentences:
        return None
    owners = torch.div(index, hyps, rounding_mode="floor")
    expected = torch.arange(sentences, device=index.device).repeat_interleave(rows // sentences)
    return rows // sentences if torch.equal(owners, expected) else None


def owners(index: Tensor, hyps: int) -> Tensor:
    """The sentence each selected row decodes."""
    return torch.div(index, hyps, rounding_mode="floor")


def grouped(x: Tensor, hyps: int) -> Tensor:
    """Rows [N, T, D] as [N / hyps, hyps * T, D]: each sentence's hypotheses side by side (a view)."""
    n, t, d = x.shape
    return x.reshape(n // hyps, hyps * t, d)


def ungrouped_weights(weights: Tensor, hyps: int, t: int) -> Tensor:
    """Attention weights [B, H, hyps * T, S] of ``grouped`` queries back to one row per hypothesis [N, H, T, S]."""
    b, h, _, s = weights.shape
    return weights.view(b, h, hyps, t, s).transpose(1, 2).reshape(b * hyps, h, t, s)


def grow_in_place(buffer: Tensor | None, new: Tensor, at: int, limit: int | None) -> tuple[Tensor, Tensor]:
    """Write ``new`` [N, H, T, dh] at positions ``at``.. of ``buffer`` [N, H, capacity, dh] (a bigger one when it
    is full); returns the buffer and the view of its filled positions."""
    end = at + new.size(2)
    if buffer is None or end > buffer.size(2):
        capacity = max(end, MIN_CAPACITY, 2 * (0 if buffer is None else buffer.size(2)))
        capacity = max(end, min(capacity, limit)) if limit else capacity
        grown = new.new_empty(new.size(0), new.size(1), capacity, new.size(3))
        if buffer is not None and at:
            grown[:, :, :at] = buffer[:, :, :at]
        buffer = grown
    buffer[:, :, at:end] = new
    return buffer, buffer[:, :, :end]


def select_rows(buffer: Tensor | None, index: Tensor, length: int) -> Tensor | None:
    """The rows ``index`` of a self-attention buffer, copying only its ``length`` filled positions."""
    if buffer is None:
        return None
    picked = buffer.new_empty((index.numel(), *buffer.shape[1:]))
    torch.index_select(buffer[:, :, :length], 0, index, out=picked[:, :, :length])
    return picked
