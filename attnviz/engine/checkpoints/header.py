"""Reading a checkpoint's header without torch: validates the safetensors framing and returns the metadata.

Kept free of heavy imports so the GUI can list models (languages, metrics) before torch has loaded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from attnviz.engine.checkpoints.schema import attnviz_metadata, check_index, check_metadata, open_regular
from attnviz.engine.errors import CheckpointError

FORMAT = "attnviz-checkpoint"
FORMAT_VERSION = 1
TOKENIZER_PREFIX = "tokenizer."  # tensors holding a side's SentencePiece model bytes: tokenizer.src, tokenizer.tgt
_MAX_HEADER = 100 * 1024 * 1024


def _sniff_foreign(path: Path, head: bytes) -> None:
    if head[:2] == b"PK" or head[:1] == b"\x80":
        raise CheckpointError(
            f"{path} is a PyTorch pickle (.pt/.pth), not an attnviz checkpoint. attnviz never unpickles files, "
            "because loading a pickle can run arbitrary code. Open an attnviz .safetensors checkpoint instead, "
            "or train one with `attnviz train`.")


def require_path(path: str | os.PathLike) -> Path:
    """``path`` as a ``Path`` when it names a file or folder; a ``CheckpointError`` saying so when it names nothing
    (checked before anything heavy is imported, so a mistyped model path is told at once)."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: no such file or folder. Check the path, or pick one of the bundled models.")
    return path


def read_index(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """Validate the safetensors framing of ``path`` (any safetensors file, attnviz's or not); return (the raw
    header, its checked tensor index)."""
    path = require_path(path)
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder; choose a .safetensors checkpoint file inside it.")
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        try:
            head = f.read(8)
            n = int.from_bytes(head, "little")
            raw = f.read(min(n, _MAX_HEADER)) if len(head) == 8 and 2 <= n <= _MAX_HEADER else b""
        except OSError as exc:
            raise CheckpointError(f"{path} cannot be read ({exc.strerror}).") from None
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
    except RecursionError:  # json recurses per nesting level
        raise CheckpointError(f"{path}: its header is nested too deeply; the file is damaged or hostile.") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path} is not a safetensors file (its header is not a JSON object).")
    index = check_index(path, header)
    end = max((v["data_offsets"][1] for v in index.values()), default=0)
    if 8 + n + end > size:
        raise CheckpointError(f"{path} is truncated: it should be {8 + n + end} bytes but has {size}. "
                              "It was probably cut off while copying or saving; copy or download it again.")
    return header, index


def read_header(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """Validate the safetensors framing and the attnviz metadata of ``path``; return (metadata, tensor index)."""
    path = Path(path)
    header, index = read_index(path)
    meta_raw = attnviz_metadata(path, header)
    if meta_raw is None:
        raise CheckpointError(f"{path} is a safetensors file but not an attnviz checkpoint (no attnviz metadata).")
    try:
        meta = json.loads(meta_raw)
    except (json.JSONDecodeError, RecursionError):
        raise CheckpointError(f"{path}: its attnviz metadata is not valid JSON; the file is damaged.") from None
    check_metadata(path, meta)
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: metadata format is {meta.get('format')!r}, expected {FORMAT!r}.")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(f"{path} uses checkpoint format version {version}; this attnviz reads version "
                              f"{FORMAT_VERSION}. Update attnviz, or re-save the model with a matching version.")
    return meta, index
