"""Attention drawn with QPainter: one large labelled heatmap, and a grid of every layer x head.

Both take their data through one setter and paint a cached QImage, so redrawing is cheap (matplotlib is kept for
export). Rows are queries, columns keys, and the axis titles say so; the colour scale is fixed to 0..1 unless the
per-map scale is chosen, so maps compare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QImage, QMouseEvent, QPainter, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from attnviz.gui.colormap import color_at, to_image


@dataclass(frozen=True)
class HeatmapData:
    matrix: np.ndarray  # [R, C] weights
    rows: tuple[str, ...]  # query labels
    cols: tuple[str, ...]  # key labels
    row_axis: str
    col_axis: str
    title: str = ""
    highlight_row: int | None = None
    per_map: bool = False


class HeatmapView(QWidget):
    """A labelled heatmap with a colour bar; hovering a cell shows the exact weight and the token pair."""

    hovered = Signal(int, int)  # row, column; -1, -1 when the pointer leaves

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("heatmapView")
        self.setAccessibleName("Attention heatmap")
        self.setMouseTracking(True)
        self.setMinimumSize(320, 260)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self._data: HeatmapData | None = None
        self._image: QImage | None = None
        self._cells = QRect()
        self.placeholder = "Translate a sentence to see its attention"

    def set_data(self, data: HeatmapData | None) -> None:
        self._data = data
        self._image = to_image(data.matrix, data.per_map) if data is not None and data.matrix.size else None
        self.update()

    def data(self) -> HeatmapData | None:
        return self._data

    def sizeHint(self) -> QSize:
        return QSize(560, 440)

    def _layout(self, painter: QPainter) -> QRect:
        d = self._data
        metrics = painter.fontMetrics()
        left = max((metrics.horizontalAdvance(t) for t in d.rows), default=0) + 34
        bottom = min(max((metrics.horizontalAdvance(t) for t in d.cols), default=0), 140) + 30
        top = metrics.height() + 10 if d.title else 8
        right = 70
        area = self.rect().adjusted(left, top, -right, -bottom)
        r, c = d.matrix.shape
        cell = max(1.0, min(area.width() / max(c, 1), area.height() / max(r, 1), 72))
        return QRect(area.left(), area.top(), int(cell * c), int(cell * r))

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        text_color = self.palette().color(QPalette.ColorRole.WindowText)
        if self._data is None or self._image is None:
            painter.setPen(text_color)
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.placeholder)
            return
        d = self._data
        cells = self._cells = self._layout(painter)
        r, c = d.matrix.shape
        ch, cw = cells.height() / r, cells.width() / c
        painter.drawImage(cells, self._image)
        painter.setPen(text_color)
        if d.title:
            painter.drawText(QRect(cells.left(), 2, self.width() - cells.left(), painter.fontMetrics().height() + 4),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, d.title)
        for i, label in enumerate(d.rows):
            y = int(cells.top() + (i + 0.5) * ch)
            painter.drawText(QRect(0, y - 9, cells.left() - 6, 18), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                             label)
        painter.save()
        for j, label in enumerate(d.cols):
            x = int(cells.left() + (j + 0.5) * cw)
            painter.save()
            painter.translate(x + 5, cells.bottom() + 6)
            painter.rotate(-90)
            painter.drawText(QRect(-140, -10, 140, 20), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                             label)
            painter.restore()
        painter.restore()
        self._draw_axis_titles(painter, cells, label_depth=min(max((painter.fontMetrics().horizontalAdvance(t)
                                                                    for t in d.cols), default=0), 140))
        if d.highlight_row is not None and 0 <= d.highlight_row < r:
            painter.setPen(QPen(QColor(255, 80, 80), 2))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(QRect(cells.left() - 1, int(cells.top() + d.highlight_row * ch) - 1, cells.width() + 2,
                                   int(ch) + 2))
        self._draw_colour_bar(painter, cells, text_color)

    def _draw_axis_titles(self, painter: QPainter, cells: QRect, label_depth: int) -> None:
        d = self._data
        font = QFont(painter.font())
        font.setItalic(True)
        painter.setFont(font)
        painter.drawText(QRect(cells.center().x() - 200, cells.bottom() + label_depth + 10, 400, 18),
                         Qt.AlignmentFlag.AlignCenter, f"columns: {d.col_axis}")
        painter.save()
        painter.translate(12, cells.center().y())
        painter.rotate(-90)
        painter.drawText(QRect(-cells.height() // 2 - 60, -9, cells.height() + 120, 18), Qt.AlignmentFlag.AlignCenter,
                         f"rows: {d.row_axis}")
        painter.restore()
        font.setItalic(False)
        painter.setFont(font)

    def _draw_colour_bar(self, painter: QPainter, cells: QRect, text_color: QColor) -> None:
        d = self._data
        bar = QRect(cells.right() + 14, cells.top(), 12, max(cells.height(), 60))
        for y in range(bar.height()):
            painter.setPen(color_at(1 - y / max(bar.height() - 1, 1)))
            painter.drawLine(bar.left(), bar.top() + y, bar.right(), bar.top() + y)
        lo, hi = (float(d.matrix.min()), float(d.matrix.max())) if d.per_map else (0.0, 1.0)
        painter.setPen(text_color)
        painter.drawText(QPoint(bar.right() + 4, bar.top() + 10), f"{hi:.2f}")
        painter.drawText(QPoint(bar.right() + 4, bar.bottom()), f"{lo:.2f}")

    def cell_at(self, pos: QPoint) -> tuple[int, int] | None:
        if self._data is None or not self._cells.contains(pos):
            return None
        r, c = self._data.matrix.shape
        row = int((pos.y() - self._cells.top()) / self._cells.height() * r)
        col = int((pos.x() - self._cells.left()) / self._cells.width() * c)
        return min(row, r - 1), min(col, c - 1)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        cell = self.cell_at(event.position().toPoint())
        if cell is None:
            QToolTip.hideText()
            self.hovered.emit(-1, -1)
            return
        row, col = cell
        d = self._data
        QToolTip.showText(event.globalPosition().toPoint(),
                          f"{d.rows[row]} \u2192 {d.cols[col]}\nweight {d.matrix[row, col]:.4f}", self)
        self.hovered.emit(row, col)

    def leaveEvent(self, event) -> None:  # noqa: N802
        self.hovered.emit(-1, -1)


class HeadGrid(QWidget):
    """Every layer x head of one attention kind as small maps; clicking one selects it (``selected`` signal)."""

    selected = Signal(int, int)  # layer, head

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("headGrid")
        self.setAccessibleName("All layers and heads")
        self.setMinimumSize(240, 160)
        self.setMouseTracking(True)
        self._images: list[list[QImage]] = []
        self._current: tuple[int, int] | None = None
        self._tiles: dict[tuple[int, int], QRect] = {}

    def set_maps(self, maps: np.ndarray | None, per_map: bool = False, current: tuple[int, int] | None = None) -> None:
        """``maps`` [L, H, R, C]; ``current`` (layer, head) is outlined."""
        self._images = [] if maps is None else [[to_image(m, per_map) for m in layer] for layer in maps]
        self._current = current
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(420, 300)

    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        self._tiles.clear()
        if not self._images:
            return
        layers, heads = len(self._images), len(self._images[0])
        label_w, label_h, gap = 26, 16, 4
        tile_w = (self.width() - label_w - gap * heads) / heads
        tile_h = (self.height() - label_h - gap * layers) / layers
        size = max(4, int(min(tile_w, tile_h)))
        text = self.palette().color(QPalette.ColorRole.WindowText)
        painter.setPen(text)
        for h in range(heads):
            painter.drawText(QRect(label_w + h * (size + gap), 0, size, label_h), Qt.AlignmentFlag.AlignCenter,
                             f"H{h + 1}")
        for layer in range(layers):
            y = label_h + layer * (size + gap)
            painter.setPen(text)
            painter.drawText(QRect(0, y, label_w - 2, size), Qt.AlignmentFlag.AlignCenter, f"L{layer + 1}")
            for h in range(heads):
                tile = QRect(label_w + h * (size + gap), y, size, size)
                painter.drawImage(tile, self._images[layer][h])
                self._tiles[(layer, h)] = tile
                if self._current == (layer, h):
                    painter.setPen(QPen(QColor(255, 80, 80), 2))
                    painter.drawRect(tile.adjusted(-1, -1, 1, 1))

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        for (layer, head), tile in self._tiles.items():
            if tile.contains(event.position().toPoint()):
                self.selected.emit(layer, head)
                return

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        for (layer, head), tile in self._tiles.items():
            if tile.contains(event.position().toPoint()):
                QToolTip.showText(event.globalPosition().toPoint(), f"Layer {layer + 1}, head {head + 1}: click to "
                                  "open it in the large view", self)
                return

