"""Reordering a mapped table's rows (an NLLB folder's 256k-row shared embedding, ``hub.fairseq_weights``) without
holding it twice: the rows copied chunk by chunk and the mapped file's pages given back once no later chunk reads
them (``checkpoints.mapped.release``), counted in this process's resident memory of the mapping."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from attnviz.engine.checkpoints.header import read_index
from attnviz.engine.checkpoints.mapped import MAPS, gathered_rows, map_tensors, mapping_of, release

pytestmark = pytest.mark.skipif(not MAPS, reason="weights are mapped on POSIX systems only")

ROWS, WIDTH = 8192, 512  # 16 MiB of float32
HUGE_PAGE_KIB = 2048  # a read may map a whole transparent huge page of the file again


def _resident_kib(address: int) -> int:
    """Resident KiB of the mapping holding ``address`` in this process (/proc/self/smaps)."""
    with open("/proc/self/smaps") as smaps:
        inside = False
        for line in smaps:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= address < end
            elif inside and line.startswith("Rss:"):
                return int(line.split()[1])
    raise AssertionError("no mapping holds the address")


@pytest.fixture
def mapped_table(tmp_path):
    path = tmp_path / "table.safetensors"
    values = torch.randn(ROWS, WIDTH)
    for pad in range(64):  # a header length that puts the data at a multiple of 64 bytes: mapped, not read
        save_file({"table": values}, path, metadata={"pad": "x" * pad})
        if (8 + int.from_bytes(path.read_bytes()[:8], "little")) % 64 == 0:
            break
    table = map_tensors(path, read_index(path)[1], "weights")["table"]
    assert mapping_of(table) is not None, "the test file should hold a mapped tensor"
    return table


def test_rows_are_reordered_and_the_mapped_copy_given_back(mapped_table):
    original = mapped_table.clone()
    order = torch.tensor([3, 1, 2, 2, 0, *range(4, ROWS)])  # fairseq's ids behind attnviz's: one more row
    float(mapped_table.sum())  # every page resident, as the weights' finiteness check leaves them
    before = _resident_kib(mapped_table.data_ptr())
    assert before >= ROWS * WIDTH * 4 // 1024
    out = gathered_rows(mapped_table, order, chunk=1024)
    assert out.dtype == mapped_table.dtype and out.shape == (ROWS + 1, WIDTH)
    assert torch.equal(out, original.index_select(0, order))
    assert out.untyped_storage().data_ptr() != mapped_table.untyped_storage().data_ptr()
    after = _resident_kib(mapped_table.data_ptr())
    assert after <= HUGE_PAGE_KIB + 64  # the table's pages went back, all but one huge page the last chunk read
    assert torch.equal(mapped_table, original)  # what was given back reads from the file again, unchanged


def test_an_ordinary_tensor_is_never_given_back():
    table = torch.randn(64, 1024)
    kept = table.clone()
    assert mapping_of(table) is None and release(table) is False
    assert torch.equal(table, kept)
    assert torch.equal(gathered_rows(table, torch.tensor([5, 0, 63]), chunk=1), kept[[5, 0, 63]])
