"""``PlainTranslator``: a MarianMT folder opened without torch for plain translation (greedy or beam, float32, no
attention captured), and ``open_plain``, which opens one or says why it does not (the caller then takes the torch
path, which covers everything: capture, int8, half precision, other kinds, and says what is wrong with a folder).

Opening reads the folder's files once (``folder_parts``), reads the safetensors weights (``engine.plain.weights``),
checks their names and shapes against the folder's plan and their values for inf and NaN, and reorders nothing.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from attnviz.engine.checkpoints.card import ModelCard
from attnviz.engine.checkpoints.folder import check_shapes
from attnviz.engine.checkpoints.memory import check_fits
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import CheckpointError, InputError
from attnviz.engine.hub.marian import plan_of_parts
from attnviz.engine.hub.marian_files import MODEL_TYPE, MarianParts, folder_parts, model_type, weights_file
from attnviz.engine.kinds import kind_of
from attnviz.engine.plain.model import PlainMarian
from attnviz.engine.plain.network import ACTIVATIONS
from attnviz.engine.plain.search import Columns, search
from attnviz.engine.plain.weights import finite, read_float32
from attnviz.engine.search.limit import BatchProgress
from attnviz.engine.text.source import SourceText, _text
from attnviz.engine.text.vocab import PAD_ID

OFF = "ATTNVIZ_PLAIN"  # set to 0: always the torch path (comparisons, benchmarks)


class PlainTranslator(SourceText):
    """The parts of ``Translator`` that plain translation uses: ``prepare_source``, ``detokenize``,
    ``translate_batch_tokens``, ``card`` and ``model`` (its position limits)."""

    has_source = True
    languages = None  # a Marian model translates one language pair

    def __init__(self, parts: MarianParts, card: ModelCard, model: PlainMarian):
        self.kind = kind_of(parts.cfg)
        self.src_vocab, self.tgt_vocab = parts.src_vocab, parts.tgt_vocab
        self.src_spec, self.tgt_spec = parts.src_spec, parts.tgt_spec
        self.card, self.model = card, model
        self.dtype = "float32"
        self.columns = Columns(parts.tgt_order, model.vocab_columns)

    def use_languages(self, src: str | None = None, tgt: str | None = None) -> None:
        """A Marian model translates one language pair: ``open_plain``'s callers take the torch path, which says so,
        when languages are given."""
        if src is not None or tgt is not None:
            raise ValueError("the plain runtime translates one language pair; use the torch path for --src-lang")

    def use_prompt(self, prompt: str | None) -> None:
        if prompt is not None:
            raise ValueError("the plain runtime reads no prompt; use the torch path for --prompt")

    def translate_batch_tokens(self, texts: Sequence[str], decode: DecodeConfig | None = None,
                               batch_size: int = 128, shortlist: object = None,
                               progress: BatchProgress | None = None) -> list[list[str]]:
        """``Translator.translate_batch_tokens``: output tokens of many sentences, searched in batches of
        ``batch_size`` sentences of similar length, ``progress`` told of each step; empty inputs give empty outputs
        (no shortlist here)."""
        if shortlist is not None:
            raise ValueError("the plain runtime restricts no output vocabulary; use the torch path for --vmap")
        decode = decode or DecodeConfig()
        texts = [_text(text, "sentence") for text in texts]
        prepared: dict[int, list[int]] = {}
        for i, text in enumerate(texts):
            try:
                prepared[i] = self.prepare_source(text)[1]
            except InputError:
                continue
        order = sorted(prepared, key=lambda i: len(prepared[i]))
        results: list[list[str]] = [[] for _ in texts]
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            width = max(len(prepared[i]) for i in chunk)
            src = np.full((len(chunk), width), PAD_ID, dtype=np.int64)
            for row, i in enumerate(chunk):
                src[row, :len(prepared[i])] = prepared[i]
            tick = None if progress is None else functools.partial(progress, start, len(order))
            for i, ids in zip(chunk, search(self.model, src, decode, self.columns, tick), strict=True):
                results[i] = self.tgt_vocab.decode(ids)
        return results

    def translate_batch(self, texts: Sequence[str], decode: DecodeConfig | None = None,
                        batch_size: int = 128) -> list[str]:
        return [self.detokenize(toks) for toks in self.translate_batch_tokens(texts, decode, batch_size)]


def _unsupported(parts: MarianParts) -> str | None:
    cfg = parts.cfg
    if cfg.norm != "post" or cfg.positions != "sinusoidal-halves" or cfg.embed_norm:
        return "its layout is not MarianMT's usual one"
    if cfg.activation not in ACTIVATIONS:
        return f"its activation {cfg.activation} runs on the torch path"
    return None


def open_plain(folder: str | os.PathLike[str]) -> tuple[PlainTranslator | None, str]:
    """A MarianMT folder ready for plain translation, or (None, why not): not such a folder, weights not stored as
    float32 safetensors, a layout or decoding the runtime does not cover, or anything wrong with the folder (the
    torch path then reads it again and says what)."""
    path = Path(folder)
    if os.environ.get(OFF) == "0":
        return None, f"{OFF}=0"
    if not path.is_dir() or not (path / "config.json").exists() or model_type(path) != MODEL_TYPE:
        return None, "not a MarianMT folder"
    try:
        parts = folder_parts(path)
        why = _unsupported(parts)
        weights = weights_file(path)
        if why is None and weights.suffix != ".safetensors":
            why = "its weights are not a safetensors file"
        if why is not None:
            return None, why
        plan = plan_of_parts(parts)
        check_fits(path, plan.card.parameters, "float32")  # before any weight is read, as the torch path checks
        tensors, why = read_float32(weights)
        if tensors is None:
            return None, why
        check_shapes(plan.weights, {name: list(t.shape) for name, t in tensors.items()})
        if plan.card.decoding is not None and plan.card.decoding.temperature > 0:
            return None, "its configured decoding samples"
    except CheckpointError as exc:
        return None, str(exc)
    damaged = finite(tensors)
    if damaged is not None:
        return None, f"tensor {damaged!r} holds inf or NaN"
    return PlainTranslator(parts, plan.card, PlainMarian(parts.cfg, tensors, parts.src_order, parts.tgt_order)), ""
