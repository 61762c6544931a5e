"""The runs of activation patching: the clean and the corrupted teacher-forced passes, and batches of corrupted
passes in which chosen activations take the clean run's values (one ``edit`` of the network's probe points per
batch, so nothing here knows a layer class).

A ``Site`` is one probe point and an index along its axis 1: a position of a layer's output [B, T, D]
(``enc.{l}.out``, ``dec.{l}.out``) or a head of an attention block's per-head output [B, H, T, dh]
(``dec.{l}.cross.heads``); index None is the whole value. A ``Patch`` is one row of a batch: its sites take the
clean values, everything else runs on the corrupted source. Every run reads log p of the clean translation's chosen
token at every output step, as decoding reports it (``forced.next_token_logp``). Names: B rows, S source, T target,
D width, H heads, V target vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from attnviz.engine.attribution.forced import Forced, next_token_logp
from attnviz.engine.models.probes import Edit, capture, edit
from attnviz.engine.models.protocol import SearchModel
from attnviz.engine.search.torch_batch import device_of


@dataclass(frozen=True)
class Site:
    """Where a patch puts the clean value: probe ``point``, at ``index`` of its axis 1 (a position or a head)."""

    point: str
    index: int | None = None  # None: the whole value


@dataclass(frozen=True)
class Patch:
    """One patched run: its ``sites`` are clean, the rest corrupted (no site: the corrupted run itself)."""

    sites: tuple[Site, ...] = ()


@dataclass(frozen=True)
class Clean:
    """The clean run: log p(chosen) per output step [T] and the values at the points patches read ([1, ...])."""

    logp: Tensor
    values: Mapping[str, Tensor]


def chosen_logp(model: SearchModel, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
    """[B, T]: log p(``tgt_out[t]``) at every step of one teacher-forced pass of ``src`` [B, S], ``tgt_in`` [B, T]."""
    logits = model.project(model.decode(tgt_in, model.encode(src)).hidden)  # [B, T, V]
    chosen = tgt_out.expand(logits.size(0), -1)[..., None]  # [T] -> [B, T, 1]
    return next_token_logp(logits).gather(-1, chosen)[..., 0]


@torch.inference_mode()
def clean_run(model: SearchModel, forced: Forced, points: Sequence[str]) -> Clean:
    """The clean pass, its values at ``points`` (names, no patterns) kept for the patches."""
    device = device_of(model)
    with capture(model, points) as seen:
        logp = chosen_logp(model, forced.src[None].to(device), forced.tgt_in[None].to(device),
                           forced.tgt_out.to(device))
    return Clean(logp[0], {name: seen[name] for name in points})


def _restore(clean: Tensor, pairs: Sequence[tuple[int, int | None]]) -> Edit:
    """An edit of one point's batch value [B, N, ...] putting the clean value [1, N, ...] at each (row, index)."""
    whole = [row for row, index in pairs if index is None]
    rows = [row for row, index in pairs if index is not None]
    indices = [index for _, index in pairs if index is not None]

    def restore(value: Tensor) -> Tensor:
        out = value.clone()
        if whole:
            out[whole] = clean.to(out.dtype)
        if rows:
            out[rows, indices] = clean[0, indices].to(out.dtype)  # [n, ...] rows of the clean value
        return out

    return restore


def _edits(patches: Sequence[Patch], clean: Clean) -> dict[str, Edit]:
    pairs: dict[str, list[tuple[int, int | None]]] = {}
    for row, patch in enumerate(patches):
        for site in patch.sites:
            pairs.setdefault(site.point, []).append((row, site.index))
    return {point: _restore(clean.values[point], found) for point, found in pairs.items()}


@torch.inference_mode()
def patched_logp(model: SearchModel, forced: Forced, corrupt_src: Tensor, clean: Clean,
                 patches: Sequence[Patch]) -> Tensor:
    """[B, T]: log p(chosen) at every step when row b runs the corrupted source ``corrupt_src`` [S] with
    ``patches[b]``'s sites clean (in this thread only: another thread running the model meanwhile sees nothing)."""
    device, b = device_of(model), len(patches)
    src = corrupt_src[None].expand(b, -1).to(device)  # [S] -> [B, S]
    tgt_in = forced.tgt_in[None].expand(b, -1).to(device)  # [T] -> [B, T]
    with edit(model, _edits(patches, clean)):
        return chosen_logp(model, src, tgt_in, forced.tgt_out.to(device))
