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
from collections.abc import Callable, Mapping
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


ESTIMATE_PROMPT, ESTIMATE_ANSWER = 256, 128  # the positions an estimate counts: a long sentence's prompt and answer


def run_bytes(kind: Any, cfg: Any, dtype: str, prompt: int = ESTIMATE_PROMPT, answer: int = ESTIMATE_ANSWER) -> int:
    """What running ``cfg``'s network of ``kind`` takes beyond its weights, for a ``prompt`` (a source) of that many
    tokens and an ``answer`` of that many: the key/value cache at ``dtype`` (grouped heads counted once) and every
    attention map a decode keeps (at the kind's capture precision: the prompt's or source's own maps, then each
    output step's row over all it sees); each capped by the model's positions."""
    prompt, answer = min(prompt, cfg.max_positions), min(answer, cfg.max_positions)
    arch = cfg.arch if isinstance(getattr(cfg, "arch", None), dict) else {}
    head_dim = arch.get("head_dim") or cfg.d_model // cfg.heads
    kv_heads = kind.kv_heads(cfg) or cfg.heads
    item, kept = ITEM_BYTES[dtype], ITEM_BYTES[kind.capture_dtype]
    layout = kind.layout(cfg)
    if kind.same_heads or not kind.has_source:  # one stream (a decoder-only LLM's views are its heads): one cache
        layers, heads = layout["decoder"]  # over prompt and answer, one map of every head
        cache = 2 * layers * kv_heads * head_dim * (prompt + answer) * item
        return cache + layers * heads * (prompt * prompt + answer * (prompt + answer)) * kept
    cache = 2 * cfg.dec_layers * cfg.heads * head_dim * (prompt + answer) * item  # self and cross keys and values
    maps = sum(layers * heads * {"encoder": prompt * prompt, "cross": answer * prompt}.get(name, answer * answer)
               for name, (layers, heads) in layout.items())
    return cache + maps * kept


def check_fits(where: str | os.PathLike[str], parameters: int, dtype: str,
               running: Callable[[str], int] | None = None) -> None:
    """Refuse a model that needs more memory than is available at ``dtype``: its weights and, given ``running``
    (dtype -> bytes, ``run_bytes``), what a decode of a long sentence takes beside them; the message says both
    figures and the cheaper precision that would fit. Nothing is read or built before."""
    available = available_bytes()
    need = lambda d: model_bytes(parameters, d) + (running(d) if running else 0)  # noqa: E731
    needed = need(dtype)
    if available is None or needed <= available:
        return
    cheaper = [d for d in DTYPES if need(d) <= available and ITEM_BYTES[d] < ITEM_BYTES[dtype]]
    advice = (f"try --dtype {'bfloat16' if 'bfloat16' in cheaper else cheaper[0]} (in the app: File > Precision)"
              if cheaper else "close other programs, or use a machine with more memory")
    beside = (f" (weights {size_text(model_bytes(parameters, dtype))}, key/value cache and attention maps of a long "
              f"sentence's decode {size_text(running(dtype))})" if running else "")
    raise CheckpointError(f"{where}: the model ({parameters:,} parameters) needs {size_text(needed)} at {dtype}"
                          f"{beside}, {size_text(available)} available; {advice}.")
