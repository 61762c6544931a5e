"""Activation patching as an attribution method: how much of the clean output's log-probability one activation
restores in a corrupted run (causal tracing, Meng et al. 2022; the practice of Vig et al. 2020 and Heimersheim &
Nanda 2024).

Teacher-forced on the clean translation's output tokens, the clean source and a corrupted one (``corrupted``) give
log p_clean and log p_corrupt of each chosen token t. A patched run is the corrupted run with one activation taken
from the clean run; it restores restored(t) = (log p_patched - log p_corrupt) / (log p_clean - log p_corrupt) of
token t: 1 fully, 0 not at all, below 0 or above 1 past either end. ``Attribution.source`` [L', T, S] patches
``enc.{l}.out`` at one source position, ``prefix`` [L', T, T] ``dec.{l}.out`` at one decoder position (after step t
it cannot matter: 0); extras ``{kind}_heads`` [T, L, H] patch one head's output (``heads``, before the output
projection) of the encoder self-, decoder self- or cross-attention at every position. An encoder and a decoder of
different depths are aligned at their last layers (index L' - 1 is both last layers; the shallower side's first
indices hold 0). Where the corruption moves log p_clean by less than ``THRESHOLD`` the ratio is noise over nothing:
that row is 0, ``extras["restorable"]`` 0, and a note says so. ``scores`` [T] is log p_clean - log p_corrupt.
Names: L' layers, T target, S source, H heads.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attnviz.engine.attribution.base import Attribution, AttributionEvent, AttributionProgress, AttributionSettings
from attnviz.engine.attribution.corruption import parse_corruption
from attnviz.engine.attribution.forced import forced_ids
from attnviz.engine.attribution.patching.corrupted import CorruptedSource, corrupted_source
from attnviz.engine.attribution.patching.runs import Patch, Site, clean_run, patched_logp
from attnviz.engine.kinds import kind_of
from attnviz.engine.models.probes import attention_point, layer_point
from attnviz.engine.models.protocol import SearchModel

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

THRESHOLD = 0.01  # nats (p changes by < 1%): below it the ratio is rounding and noise over nothing
MAX_ROWS = 64  # patched runs per batch
LOGIT_BUDGET = 8_000_000  # fewer rows for a large vocabulary: a batch holds rows x T x V logits


@dataclass(frozen=True)
class Row:
    """One patched run and where its restored fractions [T] go: ``target`` "source", "prefix" or a head kind, at
    ``layer`` (the map's index, or the network's layer for heads) and column ``index`` (a position or a head)."""

    target: str
    layer: int
    index: int
    patch: Patch


def _depths(model: SearchModel) -> tuple[int, int]:
    """(layers over the source, layers over the decoder inputs), from the probe points the network offers: an
    LLM's prompt passes its layers under the encoder's names (``enc.{l}.out``), the output steps under the decoder's."""
    offered = set(model.probes.names)
    return tuple(sum(layer_point(side, layer, "out") in offered for layer in range(model.cfg.dec_layers
                                                                                    + model.cfg.enc_layers))
                 for side in ("encoder", "decoder"))  # type: ignore[return-value]


def _layouts(model: SearchModel) -> tuple[int, int, int]:
    """(L', encoder offset, decoder offset): the maps' layers, aligned at the last layer of each side."""
    enc, dec = _depths(model)
    depth = max(enc, dec)
    return depth, depth - enc, depth - dec


def head_layout(model: SearchModel) -> dict[str, tuple[int, int]]:
    """Attention kind -> (layers, heads) of the per-head outputs the network offers (an LLM has no cross block:
    its prompt and output columns are one softmax, patched through the ``encoder`` and ``decoder`` heads)."""
    offered = set(model.probes.names)
    return {kind: (layers, heads) for kind, (layers, heads) in kind_of(model.cfg).layout(model.cfg).items()
            if layers and attention_point(kind, 0, "heads") in offered}


def plan_rows(model: SearchModel, s: int, t: int) -> list[Row]:
    """Every patched run of a sentence with ``s`` source and ``t`` target tokens."""
    _, enc_at, dec_at = _layouts(model)
    enc, dec = _depths(model)
    rows = [Row("source", enc_at + layer, j, Patch((Site(layer_point("encoder", layer, "out"), j),)))
            for layer in range(enc) for j in range(s)]
    rows += [Row("prefix", dec_at + layer, i, Patch((Site(layer_point("decoder", layer, "out"), i),)))
             for layer in range(dec) for i in range(t)]
    for kind, (layers, heads) in head_layout(model).items():
        rows += [Row(kind, layer, h, Patch((Site(attention_point(kind, layer, "heads"), h),)))
                 for layer in range(layers) for h in range(heads)]
    return rows


def chunk_rows(vocab: int, t: int) -> int:
    """Patched runs per batch: ``MAX_ROWS``, fewer when rows x T x V logits would pass ``LOGIT_BUDGET``."""
    return max(1, min(MAX_ROWS, LOGIT_BUDGET // max(vocab * t, 1)))


def patching_steps(translator: Translator, src_tokens: tuple[str, ...], tokens: tuple[str, ...],
                   settings: AttributionSettings, stop: threading.Event | None, roles: Sequence[str] = ()
                   ) -> Generator[AttributionEvent, None, None]:
    """The registered method ``patching``: the clean and corrupted runs, then the patched runs in batches (progress
    and a stop check after each), then the ``Attribution``. ``roles``: an LLM prompt's (its default corruption
    replaces the sentence's span)."""
    model = translator.model
    forced = forced_ids(translator, src_tokens, tokens)
    corrupted = corrupted_source(translator, src_tokens, parse_corruption(settings.corrupt), roles)
    rows = plan_rows(model, len(src_tokens), len(tokens))
    yield AttributionProgress(0, len(rows), "activation patching", "patched runs")
    clean = clean_run(model, forced, sorted({site.point for row in rows for site in row.patch.sites}))
    corrupt = patched_logp(model, forced, corrupted.ids, clean, [Patch()])[0]
    found = np.zeros((len(rows), len(tokens)))
    size = chunk_rows(model.cfg.tgt_vocab_size, len(tokens))
    for start in range(0, len(rows), size):
        if stop is not None and stop.is_set():
            return
        chunk = rows[start:start + size]
        found[start:start + len(chunk)] = patched_logp(model, forced, corrupted.ids, clean,
                                                       [row.patch for row in chunk]).double().cpu().numpy()
        yield AttributionProgress(start + len(chunk), len(rows), "activation patching", "patched runs")
    if stop is not None and stop.is_set():
        return
    yield _result(model, src_tokens, tokens, settings, corrupted, rows, found,
                  (clean.logp.double().cpu().numpy(), corrupt.double().cpu().numpy()))


def restored_fractions(patched: np.ndarray, clean: np.ndarray, corrupt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(restored [..., T], restorable [T] bool) of patched log p [..., T]: 0 where |clean - corrupt| < THRESHOLD."""
    delta = clean - corrupt
    restorable = np.abs(delta) >= THRESHOLD
    ratio = np.divide(patched - corrupt, delta, out=np.zeros_like(patched), where=restorable)
    return ratio, restorable


def _result(model: SearchModel, src_tokens: Sequence[str], tokens: Sequence[str], settings: AttributionSettings,
            corrupted: CorruptedSource, rows: Sequence[Row], found: np.ndarray,
            ends: tuple[np.ndarray, np.ndarray]) -> Attribution:
    clean, corrupt = ends
    restored, restorable = restored_fractions(found, clean, corrupt)  # [rows, T]
    depth, s, t = _layouts(model)[0], len(src_tokens), len(tokens)
    source, prefix = np.zeros((depth, t, s)), np.zeros((depth, t, t))
    layout = head_layout(model)  # attention kind -> (layers, heads): extras[f"{kind}_heads"]
    heads = {kind: np.zeros((t, layers, count)) for kind, (layers, count) in layout.items()}
    for row, values in zip(rows, restored):
        if row.target == "source":
            source[row.layer, :, row.index] = values
        elif row.target == "prefix":
            prefix[row.layer, :, row.index] = values
        else:
            heads[row.target][:, row.layer, row.index] = values
    prefix = np.tril(prefix)  # decoder input i cannot reach step t < i
    reported = {"corrupt": settings.corrupt, "corrupted_source": " ".join(corrupted.tokens),
                "quantity": "log p(chosen) clean - corrupted", "threshold_nats": THRESHOLD}
    extras = {f"{kind}_heads": array for kind, array in heads.items() if array.shape[1]}
    extras |= {"clean_logp": clean, "corrupt_logp": corrupt, "restorable": restorable.astype(np.uint8)}
    return Attribution("patching", reported, tuple(src_tokens), tuple(tokens), source, prefix, layered=True,
                       notes=_notes(model, tokens, corrupted, restorable), scores=clean - corrupt, extras=extras)


def _notes(model: SearchModel, tokens: Sequence[str], corrupted: CorruptedSource, restorable: np.ndarray
           ) -> tuple[str, ...]:
    notes = ["Activation patching: the share of the corruption's effect on log p(chosen) that one clean activation "
             "restores in the corrupted run, (log p patched - log p corrupted) / (log p clean - log p corrupted): 1 "
             "all of it, 0 none. Source columns: the encoder layer's (an LLM's layer over the prompt's) output at "
             "that source position; prefix columns: the decoder layer's output at that decoder input.",
             f"Corrupted run: {corrupted.said}.", *corrupted.notes]
    enc, dec = _depths(model)
    if enc != dec:
        shallow = "decoder" if dec < enc else "encoder"
        notes.append(f"The encoder has {enc} layers and the decoder {dec}: the maps align their last layers, so the "
                     f"first {abs(enc - dec)} of the {shallow}'s side hold 0.")
    flat = [f"{i + 1} ({tokens[i]!r})" for i in np.flatnonzero(~restorable).tolist()]
    if flat:
        notes.append(f"At output step {', '.join(flat)} the corruption moves log p(chosen) by less than {THRESHOLD} "
                     "nats: there is nothing to restore, so the row is 0 (extras 'restorable' 0).")
    return tuple(notes)
