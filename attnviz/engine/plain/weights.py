"""A safetensors file's float32 tensors as numpy arrays.

``read_float32`` answers None (with the reason) for anything it does not read as is, a dtype other than F32 or a
tensor not aligned for float32, so that the caller falls back to the torch loader, which reads or refuses it.
"""

from __future__ import annotations

import json
import math
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


def read_float32(path: Path) -> tuple[dict[str, np.ndarray] | None, str]:
    """Every tensor of ``path`` read into float32 arrays of its own, or (None, why not).

    Read, not mapped: a product streams every weight at every step, and the page cache's 4 KiB pages cost it about a
    tenth of its time against numpy's own allocations (which ask for huge pages); reading keeps one copy resident,
    as a mapping whose pages were all touched would."""
    try:
        header, start = _header(path)
    except (OSError, ValueError, CheckpointError) as exc:
        return None, f"its weights header could not be read here ({exc})"
    size = path.stat().st_size
    tensors: dict[str, np.ndarray] = {}
    with open(path, "rb") as f:
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            if not isinstance(entry, dict) or entry.get("dtype") != "F32":
                return None, f"tensor {name!r} is stored as {entry.get('dtype') if isinstance(entry, dict) else '?'}"
            try:
                first, last = (start + int(o) for o in entry["data_offsets"])
                shape = tuple(int(n) for n in entry["shape"])
            except (KeyError, TypeError, ValueError):
                return None, f"tensor {name!r} has no readable offsets or shape"
            if first < start or last > size or min(shape, default=1) < 0 or last - first != 4 * math.prod(shape):
                return None, f"tensor {name!r} is not laid out as its shape says"
            tensors[name] = np.empty(shape, dtype=np.float32)
            f.seek(first)
            if f.readinto(tensors[name].data.cast("B")) != last - first:
                return None, f"tensor {name!r} could not be read whole"
    return tensors, ""


def finite(tensors: dict[str, np.ndarray]) -> str | None:
    """The name of the first tensor holding inf or NaN, or None (a sum is finite exactly when every value is, short
    of an overflow, which the slower element check then tells apart)."""
    for name, value in tensors.items():
        if not np.isfinite(value.sum(dtype=np.float64)) and not np.isfinite(value).all():
            return name
    return None
