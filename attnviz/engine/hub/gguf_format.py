"""The GGUF container (llama.cpp's model file) read without torch: its metadata and its tensors' index, every length
and offset checked against the file, the tensor data memory-mapped (``GGUFFile.data``).

The ``gguf`` package (llama.cpp's own) dequantizes the tensors and names the quantisation types; its
``GGUFReader`` is not used to open the file, because it builds a Python object for every element of every metadata
array (262,144 tokens, scores and types for Gemma 3): 16 s to open a 270M model here, against 0.3 s for this reader,
which reads a string array as strings and a numeric one with one ``numpy.frombuffer``.

Layout (version 2 and 3, little-endian): ``GGUF``, the version (u32), the tensor and key counts (u64); each key a
string (u64 length, UTF-8) with a value type (u32) and its value (an array: its element type, u64 count, elements);
each tensor its name, dimension count (u32), dimensions (u64, innermost first), type (u32) and offset (u64) from the
data section, which starts at the next multiple of ``general.alignment`` (32 by default).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.engine.checkpoints.schema import open_regular
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub.parsed import once

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_KEYS = 100_000
MAX_TENSORS = 1_000_000
MAX_DIMS = 4
AGAIN_GGUF = "download the file again, or convert the model again with llama.cpp"
# value type -> struct format of one element (8 string, 9 array: read apart)
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
NUMPY = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32, 6: np.float32,
         7: np.bool_, 10: np.uint64, 11: np.int64, 12: np.float64}


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor's index entry: its ``shape`` as numpy holds it (outermost first: rows, then columns), its
    quantisation type's name and number, and where its bytes lie in the file."""

    name: str
    shape: tuple[int, ...]
    type_name: str
    type_id: int
    start: int  # offset in the file
    size: int  # bytes


@dataclass(frozen=True)
class GGUFFile:
    """A GGUF file's metadata (numeric arrays as numpy arrays, string arrays as lists) and tensor index."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, GGUFTensor]

    def type_counts(self) -> dict[str, int]:
        """How many tensors of each quantisation type, most first (``attnviz info``)."""
        return dict(Counter(t.type_name for t in self.tensors.values()).most_common())

    def data(self, tensor: GGUFTensor) -> np.ndarray:
        """``tensor``'s bytes, memory-mapped (read-only), shaped [rows..., bytes a row]."""
        with open_regular(self.path, "a GGUF file") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        raw = np.frombuffer(mapped, dtype=np.uint8, count=tensor.size, offset=tensor.start)
        rows = tensor.shape[:-1] or (1,)
        return raw.reshape(*rows, -1)


def is_gguf(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts as a GGUF file does (cheap: its first four bytes)."""
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


class _Cursor:
    """Little-endian reads from ``buf`` with every length checked against what is left of the file."""

    def __init__(self, path: Path, buf: mmap.mmap):
        self.path, self.buf, self.at = path, buf, 0

    def fail(self, what: str) -> CheckpointError:
        return CheckpointError(f"{self.path} is a damaged GGUF file: {what} (at byte {self.at:,}); {AGAIN_GGUF}.")

    def take(self, n: int, what: str) -> int:
        if n < 0 or self.at + n > len(self.buf):
            raise self.fail(f"{what} runs past the end of the file")
        at, self.at = self.at, self.at + n
        return at

    def scalar(self, fmt: str, what: str) -> Any:
        size = struct.calcsize("<" + fmt)
        return struct.unpack_from("<" + fmt, self.buf, self.take(size, what))[0]

    def string(self, what: str) -> str:
        n = self.scalar("Q", what)
        at = self.take(n, what)
        try:
            return bytes(self.buf[at:at + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8 text") from None

    def value(self, kind: int, key: str) -> Any:
        if kind == 6:  # float32: the shortest decimal that is this float32 (1e-06, not 9.999999974752427e-07)
            return float(str(np.float32(self.scalar("f", f"the value of {key!r:.60}"))))
        if kind in SCALARS:
            return self.scalar(SCALARS[kind], f"the value of {key!r:.60}")
        if kind == 8:
            return self.string(f"the value of {key!r:.60}")
        if kind != 9:
            raise self.fail(f"key {key!r:.60} has an unknown value type {kind}")
        inner, count = self.scalar("I", key), self.scalar("Q", key)
        if inner == 9:
            raise self.fail(f"key {key!r:.60} holds arrays of arrays, which no model file needs")
        if inner == 8:
            if count > len(self.buf) - self.at:  # each string takes 8 bytes at least
                raise self.fail(f"the array of {key!r:.60} claims {count:,} strings")
            return [self.string(f"an element of {key!r:.60}") for _ in range(count)]
        if inner not in NUMPY:
            raise self.fail(f"key {key!r:.60} has an unknown element type {inner}")
        dtype = np.dtype(NUMPY[inner])
        at = self.take(count * dtype.itemsize, f"the array of {key!r:.60}")
        return np.frombuffer(self.buf, dtype=dtype.newbyteorder("<"), count=count, offset=at).copy()


def _tensor_index(cur: _Cursor, count: int, align: int, size: int, types: dict[int, tuple[str, int, int]]
                  ) -> dict[str, GGUFTensor]:
    """The tensor entries, each one's bytes within the data section and none overlapping another."""
    entries = []
    for _ in range(count):
        name = cur.string("a tensor's name")
        dims = cur.scalar("I", f"tensor {name!r:.60}'s dimension count")
        if not 1 <= dims <= MAX_DIMS:
            raise cur.fail(f"tensor {name!r:.60} has {dims} dimensions")
        shape = tuple(cur.scalar("Q", f"tensor {name!r:.60}'s shape") for _ in range(dims))[::-1]
        kind, offset = cur.scalar("I", f"tensor {name!r:.60}'s type"), cur.scalar("Q", f"tensor {name!r:.60}")
        entries.append((name, shape, kind, offset))
    data_start = -(-cur.at // align) * align
    tensors: dict[str, GGUFTensor] = {}
    for name, shape, kind, offset in entries:
        if kind not in types:
            raise CheckpointError(f"{cur.path}: tensor {name!r:.60} has the unknown quantisation type {kind}; "
                                  f"{AGAIN_GGUF}.")
        type_name, block, block_bytes = types[kind]
        if any(d <= 0 for d in shape) or shape[-1] % block:
            raise cur.fail(f"tensor {name!r:.60} has the shape {list(shape)}, which {type_name} blocks of "
                           f"{block} cannot hold")
        nbytes = int(np.prod(shape, dtype=object)) // block * block_bytes
        start = data_start + offset
        if offset % align or start + nbytes > size:
            raise cur.fail(f"tensor {name!r:.60}'s data lies outside the file or off its alignment")
        if name in tensors:
            raise cur.fail(f"tensor {name!r:.60} is listed twice")
        tensors[name] = GGUFTensor(name, shape, type_name, kind, start, nbytes)
    spans = sorted((t.start, t.start + t.size, t.name) for t in tensors.values())
    for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
        if start < end:
            raise cur.fail(f"tensors {first!r:.40} and {second!r:.40} overlap")
    return tensors


def quant_types() -> dict[int, tuple[str, int, int]]:
    """Every quantisation type ``gguf`` knows: number -> (name, values a block, bytes a block)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType  # numpy only: no torch

    return {int(t): (t.name, *GGML_QUANT_SIZES[t]) for t in GGMLQuantizationType if t in GGML_QUANT_SIZES}


@once
def read_gguf(path: Path) -> GGUFFile:
    """The metadata and tensor index of the GGUF file at ``path`` (CheckpointError saying what is wrong)."""
    with open_regular(path, "a GGUF file") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 24:
            raise CheckpointError(f"{path} is {size} bytes long, too short for a GGUF file; {AGAIN_GGUF}.")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            cur = _Cursor(path, buf)
            if bytes(buf[:4]) != MAGIC:
                raise CheckpointError(f"{path} does not start with GGUF: it is not a GGUF file.")
            cur.at = 4
            version = cur.scalar("I", "the version")
            if version not in VERSIONS:
                raise CheckpointError(f"{path} is GGUF version {version}; attnviz reads versions 2 and 3 (a "
                                      "big-endian file reads as a huge version): convert it again with llama.cpp.")
            count, keys = cur.scalar("Q", "the tensor count"), cur.scalar("Q", "the key count")
            if count > MAX_TENSORS or keys > MAX_KEYS:
                raise cur.fail(f"it claims {count:,} tensors and {keys:,} keys")
            metadata: dict[str, Any] = {}
            for _ in range(keys):
                key = cur.string("a key")
                metadata[key] = cur.value(cur.scalar("I", f"key {key!r:.60}'s type"), key)
            align = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
            if not isinstance(align, int) or isinstance(align, bool) or not 1 <= align <= 2**20:
                raise cur.fail(f"general.alignment is {align!r:.40}")
            tensors = _tensor_index(cur, count, align, size, quant_types())
    return GGUFFile(path, version, metadata, tensors)
