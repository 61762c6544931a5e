"""The output projection's weight laid out in column panels, for the few rows a decoding step multiplies.

A MarianMT output projection is a [V, D] table (58k x 512 for OPUS-MT), usually the tied embedding too. OpenBLAS
multiplies 1-15 rows by its transpose slowly: ``x @ W.T`` streams W at about half the memory's pace, and a product by
row blocks of W (``network.Dense``) still computes 5 rows in about three times what reading W once takes. Laid out
as panels, ``[V // PANEL, D, PANEL]`` (each panel the transpose of ``PANEL`` consecutive rows), one batched product
``x @ panels`` is 1.7x (1 row) to 2.6x (5 rows) faster there, and level with ``x @ W.T`` at 128 rows
(``docs/benchmarks.md#without-attention-against-ctranslate2``). The table is rearranged in place, ``CHUNK`` panels
at a time (no second copy of it), and its rows are still read from the panels for the embedding (``rows``). Rows
past the last whole panel stay as they were and are multiplied on their own.
"""

from __future__ import annotations

import numpy as np

Array = np.ndarray
PANEL = 64  # columns a panel: measured fastest for 1-10 rows of a 58k x 512 projection (32 and 96 slower)
CHUNK = 32  # panels rearranged at a time (4 MiB of a 512-wide float32 table)


class Panels:
    """``x @ table.T + bias`` and ``table[ids]`` over ``table`` [V, D], which is rearranged in place: the caller
    must read it only through this object from then on."""

    def __init__(self, table: Array, bias: Array):
        if table.ndim != 2 or not table.flags.c_contiguous or table.dtype != np.float32:
            raise ValueError("panels need a C-contiguous float32 [V, D] table")
        self.vocab, self.width = table.shape
        self.whole = self.vocab // PANEL * PANEL
        self.panels = table[:self.whole].reshape(-1, self.width, PANEL)  # the same memory, reinterpreted ...
        rows = table[:self.whole].reshape(-1, PANEL, self.width)
        for start in range(0, rows.shape[0], CHUNK):  # ... once each panel holds its rows' transpose (a few MiB of
            chunk = rows[start:start + CHUNK]  # them at a time through a temporary copy)
            chunk.reshape(-1)[:] = np.swapaxes(chunk, 1, 2).ravel()
        self.rest = table[self.whole:]  # [V - whole, D], row-major
        self.bias = bias

    @property
    def shape(self) -> tuple[int, int]:
        return self.vocab, self.width

    def __call__(self, x: Array) -> Array:
        """[N, D] -> [N, V] logits."""
        n = x.shape[0]
        out = np.empty((n, self.vocab), dtype=np.float32)
        if self.whole:
            columns = out[:, :self.whole]
            columns.shape = (n, -1, PANEL)  # a view (setting the shape never copies)
            columns[...] = np.swapaxes(np.matmul(x[None], self.panels), 0, 1)
        if self.vocab > self.whole:
            out[:, self.whole:] = x @ self.rest.T
        out += self.bias
        return out

    def rows(self, ids: Array) -> Array:
        """The table's rows ``ids`` (any shape) -> [*ids.shape, D]."""
        flat = ids.reshape(-1)
        out = np.empty((flat.size, self.width), dtype=np.float32)
        inside = flat < self.whole
        panel_ids = flat[inside]
        out[inside] = self.panels[panel_ids // PANEL, :, panel_ids % PANEL]
        out[~inside] = self.rest[flat[~inside] - self.whole]
        return out.reshape(*ids.shape, self.width)

    def arrays(self) -> tuple[Array, Array]:
        """The values it holds (for a finiteness check): the panels and the remaining rows."""
        return self.panels, self.rest
