"""ModelCard: a typed, torch-free description of a checkpoint, read from its header.

The model picker, ``attnviz info`` and the Train tab read a checkpoint through this card (languages, kind, sizes,
metrics, history, recipe) instead of indexing raw metadata dicts; a ``Translator`` and an imported model's folder
(its format in ``engine.hub``) describe themselves with the same card. Building one never imports torch: the
parameter count comes from the tensor index's shapes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attnviz.engine.checkpoints.header import TOKENIZER_PREFIX, read_header
from attnviz.engine.config import DecodeConfig, ModelConfig
from attnviz.engine.errors import CheckpointError, ConfigError
from attnviz.engine.kinds import ModelKind, check, kind_of
from attnviz.engine.records import EvalRecord, SplitMetrics
from attnviz.engine.text.tokenize import languages_label


@dataclass(frozen=True)
class ModelCard:
    """What a checkpoint holds, for people and for the parts of the app that only describe models."""

    name: str
    config: ModelConfig
    src_tokenizer: Mapping[str, Any]
    tgt_tokenizer: Mapping[str, Any]
    src_vocab_size: int
    tgt_vocab_size: int
    parameters: int
    dtype: str = "float32"  # what the weights are stored as
    runs_as: str | None = None  # the dtype a loaded model runs at (None: not loaded)
    int8: str | None = None  # which layers a loaded model runs in int8 (``models.quantize.int8_summary``), or None
    path: str | None = None
    preset: str | None = None
    metrics: Mapping[str, SplitMetrics] = field(default_factory=dict)  # split ("val", "test") -> figures
    history: tuple[EvalRecord, ...] = ()
    recipe: Mapping[str, Any] | None = None  # the training recipe, as ``Recipe.to_dict`` wrote it
    train_config: Mapping[str, Any] | None = None
    created: Mapping[str, Any] = field(default_factory=dict)
    alignment_head: tuple[int, int] | None = None  # (layer, head), 0-based: the cross-attention head trained to align
    # the decoding an imported model's authors configured (``engine.hub.generation``): DecodeConfig fields, "notes"
    # (settings not applied) and "source" (the file)
    generation: Mapping[str, Any] | None = None
    # a multilingual model's language tags (``engine.text.languages.Languages.to_dict``: tags, tgt, src), or None
    language_tags: Mapping[str, Any] | None = None

    @property
    def decoding(self) -> DecodeConfig | None:
        """The decoding the model's authors configured, or None (attnviz's own settings apply)."""
        if not self.generation:
            return None
        fields = {k: v for k, v in self.generation.items() if k not in ("notes", "source")}
        try:
            return DecodeConfig.from_dict(fields)
        except (ConfigError, TypeError):
            return None

    def decoding_label(self, decode: DecodeConfig | None = None, changed: str = "") -> str | None:
        """"as configured by the model (beam 4, ...)", with the settings it does not apply, or None; ``decode``: the
        configured decoding with the user's ``changed`` settings (e.g. "--beam") in place."""
        decode = decode or self.decoding
        if decode is None or self.generation is None:
            return None
        notes = list(self.generation.get("notes") or [])
        label = f"as configured by the model{', ' + changed + ' changed' if changed else ''} " \
                f"({describe_decoding(decode)})"
        return label + (f"; not applied: {', '.join(notes)}" if notes else "")

    @property
    def kind(self) -> ModelKind:
        return kind_of(self.config)

    @property
    def src_lang(self) -> str:
        return str(self.src_tokenizer.get("lang", "?"))

    @property
    def tgt_lang(self) -> str:
        return str(self.tgt_tokenizer.get("lang", "?"))

    @property
    def languages(self) -> str:
        """"German -> English", or "English characters (language model)"."""
        return languages_label(self.src_lang, self.tgt_lang, self.kind.has_source,
                               str(self.tgt_tokenizer.get("mode", "spacy")))

    @property
    def title(self) -> str:
        """Languages, marked with the kind's short label when it has one ("German -> English (LSTM)")."""
        return self.languages + (f" ({self.kind.short_label})" if self.kind.short_label else "")

    def headline(self) -> str:
        """The figure a model list shows: test BLEU, else validation loss, else nothing."""
        test, val = self.metrics.get("test"), self.metrics.get("val")
        if test is not None and test.bleu_tok is not None:
            return f"test BLEU {test.bleu_tok:.1f}"
        if val is not None and val.loss is not None:
            return f"val loss {val.loss:.3f}"
        return ""

    def to_info(self) -> dict[str, Any]:
        """The plain-JSON description ``attnviz info --json`` prints."""
        return {
            "src_lang": self.src_lang, "tgt_lang": self.tgt_lang, "languages": self.languages, "name": self.name,
            "kind": self.kind.name, "attention_kinds": list(self.kind.attention_kinds),
            "model": self.config.to_dict(), "parameters": self.parameters,
            "src_vocab_size": self.src_vocab_size, "tgt_vocab_size": self.tgt_vocab_size,
            "src_tokenizer": dict(self.src_tokenizer), "tgt_tokenizer": dict(self.tgt_tokenizer),
            "metrics": {split: m.to_dict() for split, m in self.metrics.items()}, "preset": self.preset,
            "train_config": None if self.train_config is None else dict(self.train_config),
            "history": [r.to_dict() for r in self.history], "created": dict(self.created), "dtype": self.dtype,
            **({"runs_as": self.runs_as} if self.runs_as else {}), **({"int8": self.int8} if self.int8 else {}),
            "path": self.path, **({"alignment_head": list(self.alignment_head)} if self.alignment_head else {}),
            **({"generation": dict(self.generation)} if self.generation else {}),
            **({"language_tags": dict(self.language_tags)} if self.language_tags else {}),
        }


def _cut_offs(decode: DecodeConfig) -> str:
    cuts = ([f"top-k {decode.sample_top_k}"] if decode.sample_top_k else []) + \
        ([f"top-p {decode.sample_top_p:g}"] if decode.sample_top_p < 1 else [])
    return f", {', '.join(cuts)}" if cuts else ""


def describe_decoding(decode: DecodeConfig) -> str:
    """A search's settings in a few words: "beam 4, length penalty 1.0, at most 511 tokens, ..."."""
    parts = [f"beam {decode.beam}" if decode.beam > 1 else
             f"sampled at temperature {decode.temperature:g}{_cut_offs(decode)} (seed {decode.seed})"
             if decode.temperature > 0 else "greedy"]
    if decode.beam > 1:
        rule = "length ** penalty" if decode.length_rule == "power" else "GNMT"
        parts.append(f"length penalty {decode.length_penalty:g} ({rule})")
        if decode.early_stopping != "attnviz":
            parts.append(f"early stopping {decode.early_stopping}")
    parts.append(f"at most {decode.max_len} tokens")
    if decode.no_repeat_ngram:
        parts.append(f"no repeated {decode.no_repeat_ngram}-grams")
    if decode.bad_words:
        parts.append(f"{len(decode.bad_words)} banned token sequence{'s' * (len(decode.bad_words) > 1)}")
    if decode.forced_bos >= 0:
        parts.append("forced first token")
    if decode.forced_eos >= 0:
        parts.append("forced end token")
    return ", ".join(parts)


def _section(meta: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = meta.get(key)
    if not isinstance(value, kind):
        raise CheckpointError(f"{where}: its {key} is missing or not a {kind.__name__}; the file is damaged or was "
                              "not written by attnviz. Re-save it with attnviz, or train a new model.")
    return value


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def card_from_metadata(meta: Mapping[str, Any], parameters: int, path: str | None = None) -> ModelCard:
    """A card from a checkpoint's metadata (raises ``CheckpointError`` naming what is wrong)."""
    where = path or "the checkpoint"
    try:
        config = check(ModelConfig.from_dict(_section(meta, "model", dict, where)))
    except (ConfigError, TypeError) as exc:
        raise CheckpointError(f"{where}: its model settings are invalid: {exc}") from None
    metrics = meta.get("metrics") or {}
    history = meta.get("history") or []
    return ModelCard(
        name=str(meta.get("name") or ""), config=config,
        src_tokenizer=_section(meta, "src_tokenizer", dict, where),
        tgt_tokenizer=_section(meta, "tgt_tokenizer", dict, where),
        src_vocab_size=len(_section(meta, "src_vocab", list, where)),
        tgt_vocab_size=len(_section(meta, "tgt_vocab", list, where)),
        parameters=parameters, dtype=str(meta.get("dtype", "float32")), path=path, preset=meta.get("preset"),
        runs_as=str(meta["runs_as"]) if meta.get("runs_as") else None,
        int8=str(meta["int8"]) if meta.get("int8") else None,
        metrics={str(k): SplitMetrics.from_dict(v) for k, v in metrics.items() if isinstance(v, Mapping)}
        if isinstance(metrics, Mapping) else {},
        history=tuple(EvalRecord.from_dict(r) for r in history if isinstance(r, Mapping))
        if isinstance(history, list) else (),
        recipe=_mapping(meta.get("recipe")), train_config=_mapping(meta.get("train_config")),
        created=_mapping(meta.get("created")) or {},
        alignment_head=_alignment_head(meta.get("alignment_head"), config),
        generation=_mapping(meta.get("generation")),
        language_tags=_mapping(meta.get("languages")),
    )


def _alignment_head(value: Any, config: ModelConfig) -> tuple[int, int] | None:
    """A stored ``[layer, head]`` that exists in the model, else None."""
    layout = kind_of(config).layout(config).get("cross")
    if (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value) and layout
            and 0 <= value[0] < layout[0] and 0 <= value[1] < layout[1]):
        return value[0], value[1]
    return None


def stored_parameters(index: Mapping[str, Any]) -> int:
    """Parameters stored in a safetensors tensor index (tied weights are stored once, so counted once)."""
    total = 0
    for name, entry in index.items():
        if name.startswith(TOKENIZER_PREFIX):  # a SentencePiece model's bytes, not weights
            continue
        shape = entry.get("shape") if isinstance(entry, Mapping) else None
        if isinstance(shape, list) and all(isinstance(n, int) for n in shape):
            total += math.prod(shape)
    return total


def checkpoint_card(path: str | os.PathLike[str]) -> ModelCard:
    """The card of the checkpoint file at ``path``, from its header alone (no torch, no tensor data read); an
    imported model's folder is described by its format (``engine.loading.read_card`` opens either)."""
    meta, index = read_header(path)
    return card_from_metadata(meta, stored_parameters(index), str(path))
