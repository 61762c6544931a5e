"""Reading a safetensors file's tensors without a second copy: the file is mapped, and each tensor is a view of its
bytes, read from disk when first touched (opening a 300 MB model no longer holds the file's bytes and the tensors
built from them at once).

The index given is the one ``header.read_index`` checked (dtypes, shapes, offsets inside the file), so no view can
reach past the data. The mapping is private (copy-on-write): writing to a weight changes this process's copy, never
the file. A tensor whose offset is not a multiple of its element size (safetensors does not promise alignment) is
copied alone; where mapping is unavailable or would keep the file locked while the model lives (Windows cannot
replace a mapped file, as a training run's save does) the file is read once into memory instead.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from attnviz.engine.checkpoints.schema import open_regular
from attnviz.engine.errors import CheckpointError

TORCH_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                "BOOL": torch.bool}
MAPS = os.name == "posix"  # see the module's docstring: elsewhere the bytes are read


def map_tensors(path: Path, index: Mapping[str, Any], expected: str) -> dict[str, torch.Tensor]:
    """The tensors of ``index`` (checked by ``read_index``) as views of ``path``'s mapped bytes, stored dtype kept;
    ``expected`` says what the file should be, for ``open_regular``'s refusal."""
    with open_regular(path, expected) as f:
        header_len = int.from_bytes(f.read(8), "little")
        buffer: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if MAPS else bytearray(f.read())
    start = 8 + header_len
    if start + max((e["data_offsets"][1] for e in index.values()), default=0) > len(buffer):
        raise CheckpointError(f"{path} changed while it was being opened (it is shorter than its header says); "
                              "open it again once it is written.")  # a view past the end would crash on access
    data = torch.frombuffer(buffer, dtype=torch.uint8)  # keeps ``buffer`` alive as long as a view of it lives
    tensors = {}
    for name, entry in index.items():
        first, end = entry["data_offsets"]
        dtype = TORCH_DTYPES[entry["dtype"]]
        raw = data[start + first:start + end]
        if (start + first) % dtype.itemsize:  # a misaligned tensor cannot be viewed as its dtype: copy it alone
            raw = raw.clone()
        tensors[name] = raw.view(dtype).reshape(entry["shape"])
    return tensors
