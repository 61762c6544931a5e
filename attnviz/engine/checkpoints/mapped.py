"""Reading a safetensors file's tensors with one copy in memory: each tensor is mapped from the file where its
layout allows, else read straight into its own tensor (before, the whole file was read into one bytes object and
every tensor built from it: two copies of a 300 MB model at once).

A mapped tensor is a view of the file's private (copy-on-write) mapping, read from disk when first touched: writing
to the weight changes this process's copy, never the file. How aligned a tensor must be to be mapped is the
caller's choice (``exact``). attnviz's own checkpoints map only tensors that start at a multiple of ``ALIGN`` bytes
and read the rest into fresh tensors (torch's allocator aligns to ``ALIGN``): a view at an offset that is only a
multiple of 8, as safetensors lays files out, can round differently, since a CPU kernel may choose its vector path
by alignment (a one-row product, the greedy step, does), so a bundled model keeps giving bit for bit what it gave
when its weights were copied. An imported folder maps every tensor its dtype's alignment allows: those are the
large files, where a copy costs seconds and gigabytes; their one-row products may differ from a copied weight's in
the last bit. Windows cannot replace a file that is mapped (a training run saves over its checkpoints), so there
every tensor is read. The index given is the one ``header.read_index`` checked (dtypes, shapes, offsets inside the
file), so no tensor reaches past the data.

A table whose rows a loader reorders into attnviz's ids (``reordered_rows``) is, for every imported vocabulary, the
file's table shifted by a row or two but for its first few rows: it becomes a view of its own private mapping that
starts that many rows earlier, whose first rows are then written (``shifted_rows``), so nothing is copied.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import weakref
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import torch

from attnviz.engine.checkpoints.schema import open_regular
from attnviz.engine.errors import CheckpointError

TORCH_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                "BOOL": torch.bool}
_MAPPINGS: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()  # the live mappings map_tensors made (``release``)
_FILES: weakref.WeakKeyDictionary[mmap.mmap, tuple[Path, tuple[int, ...]]] = weakref.WeakKeyDictionary()  # each
# mapping's file and its identity when mapped (``shifted_rows`` maps it again, once it is sure it is the same file)
FEW_ROWS = 64  # the most leading rows ``shifted_rows`` writes (an imported vocabulary moves 4 or 5)
RELEASE_ALIGN = 2 << 20  # a transparent huge page: ``release`` gives back whole ones
CHUNK_ROWS = 4096  # rows ``gathered_rows`` copies between two releases (16 MiB of a 1024-wide float32 table)
ALIGN = 64  # torch's CPU allocator's alignment: a mapped tensor aligned so computes exactly as a copied one
MAPS = os.name == "posix"  # see the module's docstring


def _changed(path: Path) -> CheckpointError:
    return CheckpointError(f"{path} changed while it was being opened (it is shorter than its header says); open it "
                           "again once it is written.")


def _identity(stat: os.stat_result) -> tuple[int, ...]:
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def map_tensors(path: Path, index: Mapping[str, Any], expected: str, copied: Collection[str] = (),
                exact: bool = True) -> dict[str, torch.Tensor]:
    """The tensors of ``index`` (checked by ``read_index``) at their stored dtype, mapped or read (see the module's
    docstring); ``expected`` says what the file should be, for ``open_regular``'s refusal. ``exact``: map only the
    tensors that compute exactly as a copy would (at a multiple of ``ALIGN``); else every one its dtype's alignment
    allows. The tensors named in ``copied`` are only ever reordered by the caller, never computed with as they lie,
    so they are mapped wherever their dtype allows (``reordered_rows``)."""
    with open_regular(path, expected) as f:
        start = 8 + int.from_bytes(f.read(8), "little")
        size = os.fstat(f.fileno()).st_size
        if start + max((e["data_offsets"][1] for e in index.values()), default=0) > size:
            raise _changed(path)  # a view past the end would crash on access
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if MAPS and size else None
        if mapped is not None:
            _MAPPINGS.add(mapped)
            _FILES[mapped] = (path, _identity(os.fstat(f.fileno())))
        tensors = {}
        for name, entry in index.items():
            first, end = entry["data_offsets"]
            dtype, offset = TORCH_DTYPES[entry["dtype"]], start + first
            aligned = offset % (ALIGN if exact and name not in copied else dtype.itemsize) == 0
            if mapped is not None and aligned and end > first:
                raw = torch.frombuffer(mapped, dtype=torch.uint8, count=end - first, offset=offset)
                tensors[name] = raw.view(dtype).reshape(entry["shape"])
                continue
            tensor = torch.empty(entry["shape"], dtype=dtype)
            f.seek(offset)
            if end > first and f.readinto(tensor.reshape(-1).view(torch.uint8).numpy()) != end - first:
                raise _changed(path)
            tensors[name] = tensor
    return tensors


def mapping_of(tensor: torch.Tensor) -> mmap.mmap | None:
    """The live file mapping (``map_tensors``) ``tensor``'s values lie in, or None (an ordinary tensor)."""
    if tensor.device.type != "cpu" or not tensor.is_contiguous() or not MAPS:
        return None
    start = tensor.untyped_storage().data_ptr()
    end = start + tensor.untyped_storage().nbytes()
    for mapped in list(_MAPPINGS):
        if not mapped.closed and _address(mapped) <= start and end <= _address(mapped) + len(mapped):
            return mapped
    return None


def release(tensor: torch.Tensor) -> bool:
    """Give back the memory of the pages a mapped tensor (``map_tensors``) spans, once its values are no longer needed
    (the rows of a table that were copied elsewhere): the pages leave this process's resident memory, to be read from
    the file again if touched. The tensor's last partial huge page (``RELEASE_ALIGN``) is kept: give back a table's
    rows from its start on, as ``gathered_rows`` does. Returns False, doing nothing, for a tensor
    that is not such a view."""
    mapped = mapping_of(tensor)
    if mapped is None:
        return False
    if tensor.numel():
        base, start = _address(mapped), tensor.data_ptr()
        first = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE - base  # whole pages inside the tensor only, ending
        last = (start + tensor.numel() * tensor.element_size()) // RELEASE_ALIGN * RELEASE_ALIGN - base  # where a
        if last > first:  # huge page would: a read just after maps the whole page it falls in
            mapped.madvise(mmap.MADV_DONTNEED, first, last - first)
    return True


def gathered_rows(table: torch.Tensor, rows: torch.Tensor, chunk: int = CHUNK_ROWS) -> torch.Tensor:
    """``table[rows]`` in ``table``'s dtype, built a chunk of rows at a time; where ``table`` is a view of the mapped
    weights file, the pages of the rows no later chunk reads are given back as soon as they are copied
    (``release``), so the table is never resident twice (a 256k x 1024 table held twice was NLLB-600M's
    extra gigabyte). An imported vocabulary's order is attnviz's but for a few ids
    (``hub.marian_files.attnviz_vocab``), so nearly every page goes back."""
    if mapping_of(table) is None:
        return table.index_select(0, rows)  # an ordinary tensor: nothing to give back
    out = table.new_empty((rows.numel(), *table.shape[1:]))
    later = rows.flip(0).cummin(0).values.flip(0)  # later[i]: the lowest row any position from i on reads
    for start in range(0, rows.numel(), chunk):
        end = min(start + chunk, rows.numel())
        part, first = rows[start:end], int(rows[start])
        if bool((part.diff() == 1).all()):  # consecutive rows (nearly every chunk of a vocabulary): one copy
            out[start:end].copy_(table[first:first + end - start])
        else:
            torch.index_select(table, 0, part, out=out[start:end])
        release(table[:int(later[end]) if end < rows.numel() else table.size(0)])
    return out


def reordered_rows(table: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``table[rows]``: a view where ``shifted_rows`` can make one, else a copy (``gathered_rows``). Either way the
    pages of ``table``'s own mapping are given back (``release``): the same file pages mapped twice would count
    twice in the resident size."""
    shifted = shifted_rows(table, rows)
    if shifted is None:
        return gathered_rows(table, rows)
    if shifted is not table:
        release(table)
    return shifted


def shifted_rows(table: torch.Tensor, rows: torch.Tensor) -> torch.Tensor | None:
    """``table[rows]`` as a view of a new private mapping of ``table``'s file, where ``table`` is a view of a
    mapping ``map_tensors`` made, ``rows`` are ``i + shift`` from some index on (``FEW_ROWS`` at most before it) and
    the file holds enough bytes before (or after) the table for the shifted view: the view starts ``shift`` rows
    from the table's start, and the rows before that index are written into it (copy on write: a few private pages,
    the file untouched). None, copying nothing, where any of that does not hold or the file has changed."""
    mapped = mapping_of(table)
    known = _FILES.get(mapped) if mapped is not None else None
    n = rows.numel()
    if known is None or mapped is None or table.dim() != 2 or not n:
        return None
    shift = int(rows[-1]) - (n - 1)
    moved = ((rows - torch.arange(n)) != shift).nonzero()
    first = int(moved[-1]) + 1 if moved.numel() else 0  # rows[first:] are i + shift
    row_bytes = table.size(1) * table.element_size()
    start = table.data_ptr() - _address(mapped) + shift * row_bytes
    if first > FEW_ROWS or start < 0 or start + n * row_bytes > len(mapped):
        return None
    if not first and not shift and n == table.size(0):
        return table  # the file's own order
    path, identity = known
    try:
        with open(path, "rb") as f:
            if _identity(os.fstat(f.fileno())) != identity:
                return None
            own = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    except (OSError, ValueError):
        return None
    _MAPPINGS.add(own)
    _FILES[own] = known
    leading = table.index_select(0, rows[:first])  # read before the view's first rows are written
    view = torch.frombuffer(own, dtype=torch.uint8, count=n * row_bytes, offset=start)
    view = view.view(table.dtype).view(n, table.size(1))
    view[:first] = leading
    return view


def _address(mapped: mmap.mmap) -> int:
    """Where a mapping starts in this process's memory."""
    view = ctypes.c_char.from_buffer(mapped)  # a copy-on-write mapping is writable, so from_buffer takes it
    try:
        return ctypes.addressof(view)
    finally:
        del view
