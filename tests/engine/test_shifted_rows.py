"""A reordered table as a view of the file (``engine.checkpoints.mapped.shifted_rows``): the rows ``gathered_rows``
would copy, the file untouched, the source mapping untouched, and a copy instead wherever the shift cannot be
made (too many moved rows, not enough bytes before the table, a file changed since it was mapped)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from attnviz.engine.checkpoints.header import read_index
from attnviz.engine.checkpoints.mapped import (
    FEW_ROWS,
    MAPS,
    gathered_rows,
    map_tensors,
    mapping_of,
    reordered_rows,
    shifted_rows,
)

pytestmark = pytest.mark.skipif(not MAPS, reason="weights are mapped only where the OS lets a mapped file be replaced")


def _mapped(tmp_path: Path, tensors: dict[str, torch.Tensor], name: str = "table") -> tuple[Path, torch.Tensor]:
    path = tmp_path / "w.safetensors"
    save_file(tensors, path)
    return path, map_tensors(path, read_index(path)[1], "weights", copied=[name], exact=False)[name]


def _vocab_order(n: int, shift: int, moved: int) -> torch.Tensor:
    """An imported vocabulary's order: ``moved`` leading ids taken from anywhere, then ``i + shift``."""
    head = torch.tensor([(7 * i + 3) % (n + shift) for i in range(moved)])
    return torch.cat([head, torch.arange(moved, n) + shift])


@pytest.mark.parametrize("shift", [-2, -1, 0, 1])
def test_a_shifted_table_is_a_view_with_the_gathered_rows(tmp_path, shift):
    table = torch.randn(50, 16)
    path, mapped = _mapped(tmp_path, {"before": torch.randn(300), "table": table, "after": torch.randn(40)})
    before = path.read_bytes()
    rows = _vocab_order(50 - shift, shift, 5)  # its last row is the table's last
    view = shifted_rows(mapped, rows)
    assert view is not None and mapping_of(view) is not None and mapping_of(view) is not mapping_of(mapped)
    assert torch.equal(view, table[rows])
    assert torch.equal(mapped, table)  # the leading rows were written into the view's own mapping only
    assert path.read_bytes() == before


def test_too_many_moved_rows_or_no_room_before_the_table_copy_instead(tmp_path):
    table = torch.randn(200, 8)
    _, mapped = _mapped(tmp_path, {"table": table})
    many = _vocab_order(200, -1, FEW_ROWS + 1)
    assert shifted_rows(mapped, many) is None
    assert torch.equal(reordered_rows(mapped, many), table[many])
    wide = torch.randn(6, 4096)  # rows of 16 KiB: the header before the table is shorter than one row
    _, first = _mapped(tmp_path, {"table": wide})
    rows = torch.tensor([5, 0, 0, 1, 2, 3, 4])  # i - 2 from index 2 on: the view would start before the file
    assert shifted_rows(first, rows) is None
    assert torch.equal(reordered_rows(first, rows), wide[rows])


def test_a_file_changed_since_it_was_mapped_is_not_mapped_again(tmp_path):
    table = torch.randn(40, 8)
    path, mapped = _mapped(tmp_path, {"before": torch.randn(64), "table": table})
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    rows = _vocab_order(41, -1, 4)
    assert shifted_rows(mapped, rows) is None
    assert torch.equal(reordered_rows(mapped, rows), table[rows])


def test_the_files_own_order_is_the_table_itself(tmp_path):
    table = torch.randn(20, 4)
    _, mapped = _mapped(tmp_path, {"before": torch.randn(8), "table": table})
    assert reordered_rows(mapped, torch.arange(20)) is mapped
    assert torch.equal(mapped, table)


def test_an_ordinary_tensor_is_gathered(tmp_path):
    table = torch.randn(30, 4)
    rows = _vocab_order(31, -1, 4)
    assert shifted_rows(table, rows) is None
    assert torch.equal(reordered_rows(table, rows), gathered_rows(table, rows))
