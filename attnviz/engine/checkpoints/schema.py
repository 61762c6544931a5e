"""One schema for a checkpoint's header, checked before anything is built: the file, the tensor index, the metadata.

A checkpoint comes from outside (downloaded, copied, edited by hand), so every value in its header is checked for
type, finiteness and range here, and each problem gets one message that names the file and the entry. The loader
then compares the tensor index with a model built on torch's ``meta`` device (no memory allocated), so a config
that asks for a huge model is refused before any weights are allocated. Kept free of torch at import: the GUI lists
models with these checks before torch has loaded; the checks that need tensors are in ``engine.checkpoints.store``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import stat
from pathlib import Path
from typing import Any

from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import CheckpointError

MAX_DEPTH = 32  # the deepest nesting a real header has is 4 (recipe -> corpus -> paths -> list)
DTYPE_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
# Sane ceilings for the model's sizes: far above every bundled model and preset, far below what exhausts memory.
MODEL_LIMITS = {"src_vocab_size": 2_000_000, "tgt_vocab_size": 2_000_000, "d_model": 8192, "enc_layers": 64,
                "dec_layers": 64, "heads": 256, "ff_dim": 65536, "max_positions": 16384, "hidden": 16384}
DEFAULT_INT_LIMIT = 1_000_000
FIGURES = frozenset({"bleu_tok", "sacrebleu", "chrf", "ppl", "accuracy", "loss", "sentences", "seconds", "tokens",
                     "bleu_tok_float32", "bleu_tok_float16", "loss_float32", "loss_float16", "step", "epoch"})
MAX_BUFFER_ELEMENTS = 64 * 1024 * 1024  # tensors a model builds itself (position tables), not read from the file
META_TYPES: dict[str, tuple[type, ...]] = {  # entry -> allowed JSON types (None allowed where a writer stores it)
    "model": (dict,), "src_vocab": (list,), "tgt_vocab": (list,), "src_tokenizer": (dict,), "tgt_tokenizer": (dict,),
    "metrics": (dict,), "history": (list,), "name": (str,), "created": (dict,), "dtype": (str,),
    "recipe": (dict, type(None)), "preset": (str, type(None)), "train_config": (dict, type(None)), "step": (int,),
}


def open_regular(path: Path, expected: str = "a checkpoint file; choose a .safetensors file"):
    """Open ``path`` for reading only if it is a regular file: a named pipe or a device would block the reader
    forever (and a GUI thread stuck in ``open`` cannot be stopped), so they are refused before opening."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise CheckpointError(f"{path} cannot be read ({exc.strerror}).") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a named pipe" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or
                stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise CheckpointError(f"{path} is {kind}, not {expected}.")
    try:  # O_NONBLOCK: if the path was swapped for a pipe after the stat, open still returns at once
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise CheckpointError(f"{path} cannot be read ({exc.strerror}).") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CheckpointError(f"{path} is not a regular file, not {expected}.")
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def depth(value: Any) -> int:
    """Nesting depth of a JSON value, without recursion (a hostile header may nest thousands deep)."""
    deepest, stack = 1, [(value, 1)]
    while stack:
        item, d = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        if children:  # every child is one level deeper; only containers need a visit (a 58k-piece vocabulary: one)
            deepest = max(deepest, d + 1)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((child, d + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def check_index(path: Path, header: dict[str, Any]) -> dict[str, Any]:
    """The tensor index of a parsed safetensors header, every entry checked; returns it without ``__metadata__``."""
    index = {k: v for k, v in header.items() if k != "__metadata__"}
    for name, entry in index.items():
        where = f"{path}: tensor entry {name[:60]!r}"
        if not isinstance(entry, dict):
            raise CheckpointError(f"{where} is a {type(entry).__name__}, not an object; the file is damaged.")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in DTYPE_SIZES:
            raise CheckpointError(f"{where} has dtype {str(dtype)[:20]!r}; expected one of {', '.join(DTYPE_SIZES)}.")
        if not (isinstance(shape, list) and len(shape) <= 8 and all(_is_count(n) for n in shape)):
            raise CheckpointError(f"{where} has shape {str(shape)[:60]}; expected up to 8 non-negative integers.")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(n) for n in offsets)
                and offsets[0] <= offsets[1]):
            raise CheckpointError(f"{where} has data_offsets {str(offsets)[:60]}; expected [start, end] integers.")
        if offsets[1] - offsets[0] != math.prod(shape) * DTYPE_SIZES[dtype]:
            raise CheckpointError(f"{where}: its shape {shape} does not fit its {offsets[1] - offsets[0]} bytes.")
    _check_overlap(path, index)
    return index


def _check_overlap(path: Path, index: dict[str, Any]) -> None:
    """No two tensors share bytes: each would read the other's data (safetensors refuses it only when loading)."""
    spans = sorted((entry["data_offsets"][0], entry["data_offsets"][1], name) for name, entry in index.items()
                   if entry["data_offsets"][1] > entry["data_offsets"][0])
    for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
        if start < end:
            raise CheckpointError(f"{path}: tensor entries {first[:60]!r} and {second[:60]!r} overlap (bytes "
                                  f"{start}-{end}); the file is damaged: copy or download it again.")


def _is_count(n: Any) -> bool:
    return type(n) is int and 0 <= n < 1 << 48


def attnviz_metadata(path: Path, header: dict[str, Any]) -> str | None:
    """The raw attnviz metadata string of a header (None when it has none)."""
    extra = header.get("__metadata__")
    if extra is None:
        return None
    if not isinstance(extra, dict) or not all(isinstance(v, str) for v in extra.values()):
        raise CheckpointError(f"{path}: its __metadata__ is not a map of strings; the file is damaged.")
    return extra.get("attnviz")


def check_metadata(path: Path, meta: Any) -> None:
    """Every entry of the attnviz metadata that the loader reads has the right type and range."""
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: its attnviz metadata is a {type(meta).__name__}, not an object.")
    if depth(meta) > MAX_DEPTH:
        raise CheckpointError(f"{path}: its attnviz metadata is nested more than {MAX_DEPTH} levels deep; "
                              "the file is damaged or hostile.")
    for key, types in META_TYPES.items():
        if key in meta and not (isinstance(meta[key], types) and not isinstance(meta[key], bool)):
            wanted = " or ".join("null" if t is type(None) else _JSON_NAMES[t] for t in types)
            raise CheckpointError(f"{path}: its {key!r} entry is {_json_name(meta[key])}, expected {wanted}.")
    for key in ("src_vocab", "tgt_vocab"):
        if key in meta and not all(isinstance(t, str) for t in meta[key]):
            raise CheckpointError(f"{path}: its {key} holds entries that are not strings; the file is damaged.")
    if "metrics" in meta and not all(isinstance(v, dict) for v in meta["metrics"].values()):
        raise CheckpointError(f"{path}: its 'metrics' entry must map each split to an object of figures.")
    for split, figures in meta.get("metrics", {}).items():
        bad = sorted(k for k in set(figures) & FIGURES if type(figures[k]) not in (int, float))
        if bad:
            raise CheckpointError(f"{path}: metrics {split[:40]!r} has {bad[0]!r} = {figures[bad[0]]!r:.40}, "
                                  "which is not a number.")
    for key in ("src_tokenizer", "tgt_tokenizer"):
        if not all(isinstance(v, (str, int, float, bool, type(None))) for v in meta.get(key, {}).values()):
            raise CheckpointError(f"{path}: its {key} settings must be plain values (strings, numbers).")
    if "history" in meta and not all(isinstance(v, dict) for v in meta["history"]):
        raise CheckpointError(f"{path}: its 'history' entry must be a list of objects.")
    if isinstance(meta.get("model"), dict):
        check_model_settings(path, meta["model"])


_JSON_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
               bool: "true/false"}


def _json_name(value: Any) -> str:
    if value is None:
        return "null"
    return _JSON_NAMES.get(type(value), type(value).__name__)


def check_model_settings(path: Path, settings: dict[str, Any], names: dict[str, str] | None = None) -> None:
    """Types from ``ModelConfig``'s annotations, finite numbers, integers within ``MODEL_LIMITS``; a message names
    the setting, or with ``names`` (setting -> the file's own field) the file's field (an imported folder's)."""
    declared = {f.name: str(f.type) for f in dataclasses.fields(ModelConfig)}
    for name, value in settings.items():
        kind = declared.get(name)
        where = (f"{path}: field {names.get(name, name)[:40]!r}" if names is not None
                 else f"{path}: model setting {name[:40]!r}")
        if kind == "int":
            limit = MODEL_LIMITS.get(name, DEFAULT_INT_LIMIT)
            if type(value) is not int:
                raise CheckpointError(f"{where} is {value!r:.40}, but it must be a whole number.")
            if not 0 <= value <= limit:
                raise CheckpointError(f"{where} is {value}; it must be between 0 and {limit:,}.")
        elif kind == "float" and not (type(value) in (int, float) and math.isfinite(value)):
            raise CheckpointError(f"{where} is {value!r:.40}, but it must be a finite number.")
        elif kind in ("str", "bool") and type(value) is not {"str": str, "bool": bool}[kind]:
            raise CheckpointError(f"{where} is {value!r:.40}, "
                                  f"but it must be a {'string' if kind == 'str' else 'bool'}.")
