"""What the Analysis tab draws for grouped-query attention (a decoder-only LLM's ``kv_groups`` note,
``engine.analysis.llm_heads``): lines on a layer x head map between query heads that use different key/value heads,
the key/value head of each table row, and the group named on hovering a head. Painting only; the groups are the
engine's. Models whose heads each have their own keys show nothing here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QLineF, QRect, Qt
from PySide6.QtGui import QColor, QPainter, QPen

if TYPE_CHECKING:
    from attnviz.session.attention.layout import Geometry


def group_size(notes: dict) -> int:
    """Query heads per key/value head (0 when every head has its own keys, or no notes)."""
    return int(notes.get("query_heads_per_kv_head") or 0)


def group_of(head: int, size: int) -> str:
    """'; key/value head 2 (shared by heads 3-4)' for ``head`` from 0, or '' without groups."""
    if size <= 0:
        return ""
    group = head // size
    return f"; key/value head {group + 1} (shared by heads {group * size + 1}-{(group + 1) * size})"


def draw_groups(painter: QPainter, cells: QRect, g: Geometry, heads: int, size: int) -> None:
    """Vertical lines on a layer x head map between query heads of different key/value groups (``size`` query
    heads a group)."""
    if size <= 0 or heads <= size or heads % size:
        return
    painter.save()
    for pen in (QPen(QColor(0, 0, 0), 4), QPen(QColor(255, 255, 255), 1.5)):  # visible on every colour
        pen.setCapStyle(Qt.PenCapStyle.FlatCap)
        painter.setPen(pen)
        for boundary in range(size, heads, size):
            x = cells.left() + boundary * g.cell_w
            painter.drawLine(QLineF(x, cells.top(), x, cells.top() + cells.height()))
    painter.restore()


def with_kv_column(rows: list[dict], notes: dict) -> list[dict]:
    """``HeadStats.table()`` rows with a ``kv_head`` (from 0, after ``head``) where heads share key/value heads."""
    size = group_size(notes)
    if not size:
        return rows
    out = []
    for row in rows:
        items = list(row.items())
        at = [key for key, _ in items].index("head") + 1
        out.append(dict([*items[:at], ("kv_head", row["head"] // size), *items[at:]]))
    return out
