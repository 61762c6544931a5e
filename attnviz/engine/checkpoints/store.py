"""Checkpoints: one safetensors file whose header carries everything needed to use the model.

The JSON metadata (under the header key ``attnviz``) holds the format version, model config, vocabularies,
tokenizer settings, languages, metrics, history and creation info. Loading parses the header ourselves first so
every failure gets a specific message naming the file; nothing is ever unpickled. Saving is atomic: the bytes go
to a temporary file in the same directory, are flushed and fsynced, and then renamed over the target.
"""

from __future__ import annotations

import json
import math
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch.overrides import TorchFunctionMode

from attnviz._version import __version__
from attnviz.engine.checkpoints.header import FORMAT, FORMAT_VERSION, read_header
from attnviz.engine.checkpoints.schema import MAX_BUFFER_ELEMENTS, open_regular
from attnviz.engine.errors import CheckpointError
from attnviz.engine.models.protocol import stored_state

__all__ = ["FORMAT", "FORMAT_VERSION", "atomic_write", "load_tensors", "read_header", "save_tensors"]


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash at any moment leaves either the old or the new file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX)
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def creation_info() -> dict[str, str]:
    return {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "attnviz": __version__, "torch": torch.__version__,
            "python": platform.python_version(), "platform": platform.platform(terse=True)}


def save_tensors(path: str | os.PathLike, tensors: dict[str, torch.Tensor], metadata: dict[str, Any],
                 half: bool = False) -> None:
    """Write tensors and JSON metadata atomically; ``half`` stores floating tensors as float16."""
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "dtype": "float16" if half else "float32", **metadata}
    meta.setdefault("created", creation_info())
    out = {}
    for name, t in tensors.items():
        t = t.detach().cpu()
        if t.is_floating_point():
            t = t.half() if half else t.float()
        out[name] = t.contiguous()
    atomic_write(path, st_save(out, metadata={"attnviz": json.dumps(meta, ensure_ascii=False)}))


def load_tensors(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Read metadata and tensors (floating tensors converted to float32)."""
    meta, _ = read_header(path)
    try:
        with open_regular(Path(path)) as f:
            tensors = st_load(f.read())
    except CheckpointError:
        raise
    except Exception as exc:  # safetensors raises its own SafetensorError for inconsistent offsets
        raise CheckpointError(f"{path}: the tensor data is damaged ({exc}).") from None
    return meta, {k: (v.float() if v.is_floating_point() else v) for k, v in tensors.items()}


class _SkipInit(TorchFunctionMode):
    """Skips weight initialisation while a shapes-only model is built: random init on the meta device goes through
    torch's compiler stack (importing torch._dynamo and sympy: seconds, and modules a frozen app leaves out).
    A function mode is thread-local, so a model built at the same moment on another thread is initialised."""

    SKIPPED = frozenset({*(getattr(torch.nn.init, name) for name in (
        "normal_", "uniform_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
        "trunc_normal_", "zeros_", "ones_", "constant_", "orthogonal_")),
        torch.Tensor.normal_, torch.Tensor.uniform_, torch.Tensor.zero_, torch.Tensor.fill_})

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.SKIPPED:
            return args[0] if args else (kwargs or {}).get("tensor")
        return func(*args, **(kwargs or {}))


def meta_model(build_fn: Callable[[Any], Any], cfg: Any) -> Any:
    """``build_fn(cfg)`` on torch's meta device, nothing initialised: shapes only, no memory, no time."""
    with torch.device("meta"), _SkipInit():
        return build_fn(cfg)


def model_shapes(path: str | os.PathLike, build_fn: Callable[[Any], Any], cfg: Any) -> dict[str, list[int]]:
    """The stored state's shapes of ``build_fn(cfg)``, built on torch's meta device (shapes only, no memory);
    refuses settings that cannot build a model or whose model would build ``MAX_BUFFER_ELEMENTS`` values beyond its
    weights (position tables), before anything is allocated."""
    try:
        model = meta_model(build_fn, cfg)
    except (TypeError, ValueError, RuntimeError, OverflowError) as exc:
        raise CheckpointError(f"{path}: its model settings cannot build a model ({exc}).") from None
    extra = sum(b.numel() for b in model.buffers())
    if extra > MAX_BUFFER_ELEMENTS:
        raise CheckpointError(f"{path}: its model settings need {extra:,} extra values in memory beyond its "
                              "weights; refusing a configuration this large.")
    return {k: list(v.shape) for k, v in stored_state(model).items()}


def check_against_index(path: str | os.PathLike, build_fn: Callable[[Any], Any], cfg: Any,
                        index: dict[str, Any]) -> None:
    """Refuse the checkpoint unless its tensor index holds exactly the stored state of ``build_fn(cfg)`` (tied
    weights stored once), shape for shape, checked on the meta device (``model_shapes``)."""
    expected = model_shapes(path, build_fn, cfg)
    missing = sorted(set(expected) - set(index))
    unexpected = sorted(set(index) - set(expected))
    if missing or unexpected:
        n_file = sum(math.prod(e["shape"]) for e in index.values())
        n_model = sum(math.prod(s) for s in expected.values())
        raise CheckpointError(f"{path}: tensors do not match the model config (missing: {missing[:5]}, "
                              f"unexpected: {unexpected[:5]}; the config needs {n_model:,} weights, the file holds "
                              f"{n_file:,}).")
    for name, shape in expected.items():
        if index[name]["shape"] != shape:
            raise CheckpointError(f"{path}: tensor {name} has shape {index[name]['shape']} but the config "
                                  f"needs {shape}.")


def check_finite(path: str | os.PathLike, tensors: dict[str, Any],
                 advice: str = "(training diverged or the file was damaged). Use an earlier checkpoint.") -> None:
    """Refuse NaN or infinite weights, naming the first tensor that holds them (such a model decodes garbage)."""
    for name, tensor in tensors.items():
        # a finite sum means every value is finite (NaN and inf propagate), in one pass without a mask; only a sum
        # that is not (a NaN, or finite values overflowing it) needs the exact test
        if (tensor.is_floating_point() and not bool(torch.isfinite(tensor.sum()))
                and not bool(torch.isfinite(tensor).all())):
            bad = int((~torch.isfinite(tensor)).sum())
            raise CheckpointError(f"{path}: tensor {name} holds {bad:,} NaN or infinite value(s); the weights are "
                                  f"broken {advice}")
