"""Checkpoints: one safetensors file whose header carries everything needed to use the model.

The JSON metadata (under the header key ``attnviz``) holds the format version, model config, vocabularies,
tokenizer settings, languages, metrics, history and creation info. Loading parses the header ourselves first so
every failure gets a specific message naming the file; nothing is ever unpickled. Saving is atomic: the bytes go
to a temporary file in the same directory, are flushed and fsynced, and then renamed over the target.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from attnviz.engine.errors import CheckpointError

FORMAT = "attnviz-checkpoint"
FORMAT_VERSION = 1
_MAX_HEADER = 100 * 1024 * 1024


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash at any moment leaves either the old or the new file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
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


def creation_info() -> dict[str, str]:
    from attnviz import __version__

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


def _sniff_foreign(path: Path, head: bytes) -> None:
    if head[:2] == b"PK" or head[:1] == b"\x80":
        raise CheckpointError(
            f"{path} is a PyTorch pickle (.pt/.pth), not an attnviz checkpoint. attnviz never unpickles files, "
            "because loading a pickle can run arbitrary code. Open an attnviz .safetensors checkpoint instead, "
            "or train one with `attnviz train`.")


def read_header(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """Validate the safetensors framing of ``path``; return (attnviz metadata, tensor index)."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: no such file. Check the path, or pick one of the bundled models.")
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder; choose a .safetensors checkpoint file inside it.")
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little")
        raw = f.read(min(n, _MAX_HEADER)) if len(head) == 8 and 2 <= n <= _MAX_HEADER else b""
    if not raw.startswith(b"{"):
        _sniff_foreign(path, head)
        if len(head) < 8:
            raise CheckpointError(f"{path} is not a safetensors file (it is only {size} bytes long).")
        if not (2 <= n <= _MAX_HEADER) or (raw and len(raw) == n):
            raise CheckpointError(f"{path} is not a safetensors file (its first bytes are not a safetensors header).")
    if len(raw) < n:
        raise CheckpointError(f"{path} is truncated: the file ends inside its header ({size} bytes). "
                              "It was probably cut off while copying; copy or download it again.")
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CheckpointError(f"{path} is not a safetensors file (its header is not valid JSON).") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path} is not a safetensors file (its header is not a JSON object).")
    index = {k: v for k, v in header.items() if k != "__metadata__"}
    end = max((int(v["data_offsets"][1]) for v in index.values()), default=0)
    if 8 + n + end > size:
        raise CheckpointError(f"{path} is truncated: it should be {8 + n + end} bytes but has {size}. "
                              "It was probably cut off while copying or saving; copy or download it again.")
    meta_raw = (header.get("__metadata__") or {}).get("attnviz")
    if meta_raw is None:
        raise CheckpointError(f"{path} is a safetensors file but not an attnviz checkpoint (no attnviz metadata).")
    try:
        meta = json.loads(meta_raw)
    except json.JSONDecodeError:
        raise CheckpointError(f"{path}: its attnviz metadata is not valid JSON; the file is damaged.") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: metadata format is {meta.get('format')!r}, expected {FORMAT!r}.")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(f"{path} uses checkpoint format version {version}; this attnviz reads version "
                              f"{FORMAT_VERSION}. Update attnviz, or re-save the model with a matching version.")
    return meta, index


def load_tensors(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Read metadata and tensors (floating tensors converted to float32)."""
    meta, _ = read_header(path)
    try:
        tensors = st_load(Path(path).read_bytes())
    except Exception as exc:  # safetensors raises its own SafetensorError for inconsistent offsets
        raise CheckpointError(f"{path}: the tensor data is damaged ({exc}).") from None
    return meta, {k: (v.float() if v.is_floating_point() else v) for k, v in tensors.items()}
