"""Precision and memory before loading: which dtype a model runs at, and whether it fits, known without torch.

A model's weights are stored at one floating dtype (a safetensors index says which, per tensor) and run at the one
the user asks for (``--dtype``, the app's Precision setting): ``auto`` is float32 on the CPU, where half precision
saves memory but not time, and the stored dtype on an accelerator (and for a kind whose ``stored_precision`` says so,
a decoder-only LLM, everywhere). What a model needs is its parameter count (from
its config and weights' index, no tensor read) times the bytes of that dtype; ``check_fits`` refuses a model larger
than the memory the system says is available (``/proc/meminfo``'s MemAvailable; where there is none, nothing is
refused), with the numbers and the cheaper precision to try. ``MEMINFO`` is the file read, so a test can give its
own figure.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attnviz.engine.checkpoints.header import TOKENIZER_PREFIX
from attnviz.engine.errors import CheckpointError, InputError

DTYPES = ("float32", "float16", "bfloat16")  # what a model can run at
AUTO = "auto"
DTYPE_CHOICES = (AUTO, *DTYPES)
DEVICE_CHOICES = ("cpu", "cuda", AUTO)  # where a model runs: auto is the GPU when torch sees one


def check_device_choice(choice: str) -> str:
    """``choice`` if it names a device a model can be asked to run on (``DEVICE_CHOICES``), else ``InputError``."""
    if choice not in DEVICE_CHOICES:
        raise InputError(f"unknown device {choice!r:.40}: choose one of {', '.join(DEVICE_CHOICES)}")
    return choice
ITEM_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}
MEMINFO = Path("/proc/meminfo")
GIB = 2 ** 30


def stored_dtype(index: Mapping[str, Any]) -> str:
    """The floating dtype most of a safetensors index's weights are stored at ("float32" when it names none)."""
    counts: Counter[str] = Counter()
    for name, entry in index.items():
        if name.startswith(TOKENIZER_PREFIX) or not isinstance(entry, Mapping):
            continue
        dtype = SAFETENSORS_DTYPES.get(str(entry.get("dtype")))
        shape = entry.get("shape")
        if dtype and isinstance(shape, list):
            counts[dtype] += _prod(shape)
    return counts.most_common(1)[0][0] if counts else "float32"


def _prod(shape: list[Any]) -> int:
    total = 1
    for n in shape:
        total *= n if isinstance(n, int) else 0
    return total


def resolve_dtype(choice: str, stored: str, device: str = "cpu", keep_stored: bool = False) -> str:
    """The dtype a model runs at: ``choice`` itself, or for ``auto`` float32 on the CPU (half precision is slower
    there) and the stored half precision on an accelerator; with ``keep_stored`` (an LLM, whose bf16 weights would
    take twice the memory in float32) the stored precision everywhere."""
    if choice not in DTYPE_CHOICES:
        raise InputError(f"unknown dtype {choice!r}: choose one of {', '.join(DTYPE_CHOICES)}")
    if choice != AUTO:
        return choice
    return stored if (device != "cpu" or keep_stored) and stored in ("float16", "bfloat16") else "float32"


def model_bytes(parameters: int, dtype: str) -> int:
    """The memory a model's weights take at ``dtype``."""
    return parameters * ITEM_BYTES[dtype]


def memory_by_dtype(parameters: int) -> dict[str, int]:
    """The weights' memory at every dtype a model can run at (``attnviz info``)."""
    return {dtype: model_bytes(parameters, dtype) for dtype in DTYPES}


def available_bytes() -> int | None:
    """The memory the system can give without swapping (MemAvailable), or None where ``MEMINFO`` does not say."""
    try:
        text = MEMINFO.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if key == "MemAvailable" and fields and fields[0].isdigit():
            return int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return None


def gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def size_text(n: int) -> str:
    """Bytes as people read them: MiB below a GiB, GiB above."""
    return gib(n) if n >= GIB else f"{n / 2**20:,.1f} MiB"


def check_fits(where: str | os.PathLike[str], parameters: int, dtype: str) -> None:
    """Refuse a model whose weights at ``dtype`` need more memory than is available, saying both figures and what
    to try; nothing is read or built before."""
    available = available_bytes()
    needed = model_bytes(parameters, dtype)
    if available is None or needed <= available:
        return
    cheaper = [d for d in DTYPES if model_bytes(parameters, d) <= available and ITEM_BYTES[d] < ITEM_BYTES[dtype]]
    advice = (f"try --dtype {'bfloat16' if 'bfloat16' in cheaper else cheaper[0]} (in the app: File > Precision)"
              if cheaper else "close other programs, or use a machine with more memory")
    raise CheckpointError(f"{where}: the model ({parameters:,} parameters) needs {size_text(needed)} at {dtype}, "
                          f"{size_text(available)} available; {advice}.")
