"""A safetensors file's float32 tensors as read-only numpy views of one memory map: nothing is copied, and a page
is read from disk when a product first touches it.

``mapped_float32`` answers None (with the reason) for anything it does not read as is, a dtype other than F32 or a
tensor not aligned for float32, so that the caller falls back to the torch loader, which reads or refuses it.
"""

from __future__ import annotations

import json
import mmap
import struct
from pathlib import Path

import numpy as np

from attnviz.engine.errors import CheckpointError

HEADER_LIMIT = 100 * 2**20  # the largest JSON header read (safetensors' own limit)


def _header(path: Path) -> tuple[dict, int]:
    """The JSON header and the byte offset where the tensors' data starts."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise CheckpointError(f"{path} is too short to be a safetensors file")
        size = struct.unpack("<Q", head)[0]
        if size > HEADER_LIMIT:
            raise CheckpointError(f"{path}: its safetensors header is {size:,} bytes, more than any real one")
        header = json.loads(f.read(size))
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: its safetensors header is not a JSON object")
    return header, 8 + size


def mapped_float32(path: Path) -> tuple[dict[str, np.ndarray] | None, str]:
    """Every tensor of ``path`` as a float32 view of one read-only memory map, or (None, why not)."""
    try:
        header, start = _header(path)
    except (OSError, ValueError, CheckpointError) as exc:
        return None, f"its weights header could not be read here ({exc})"
    with open(path, "rb") as f:
        try:
            buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            return None, f"its weights could not be memory-mapped ({exc})"
    data = np.frombuffer(buffer, dtype=np.uint8)
    tensors: dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or entry.get("dtype") != "F32":
            return None, f"tensor {name!r} is stored as {entry.get('dtype') if isinstance(entry, dict) else '?'}"
        first, last = (start + int(o) for o in entry["data_offsets"])
        shape = tuple(int(n) for n in entry["shape"])
        if first % 4 or last > data.size or last - first != 4 * int(np.prod(shape, dtype=np.int64)):
            return None, f"tensor {name!r} is not laid out as float32 can be mapped"
        tensors[name] = data[first:last].view(np.float32).reshape(shape)
    return tensors, ""


def finite(tensors: dict[str, np.ndarray]) -> str | None:
    """The name of the first tensor holding inf or NaN, or None (a sum is finite exactly when every value is, short
    of an overflow, which the slower element check then tells apart)."""
    for name, value in tensors.items():
        if not np.isfinite(value.sum(dtype=np.float64)) and not np.isfinite(value).all():
            return name
    return None
