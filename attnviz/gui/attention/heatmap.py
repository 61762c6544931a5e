"""Attention drawn with QPainter: one large labelled heatmap (the grid of every layer x head is in head_grid.py).

It takes its data through one setter and paints a cached QImage, so redrawing is cheap (matplotlib is kept for
export). Rows are queries, columns keys, and the axis titles say so; the colour scale is fixed to 0..1 unless the
per-map scale is chosen, so maps compare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QPoint, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QImage, QMouseEvent, QPainter, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from attnviz.gui.accessible import announce
from attnviz.gui.attention.colormap import scale_image, signed_limit, to_image
from attnviz.gui.attention.labels import DrawnLabel, plan_labels, scaled_font
from attnviz.gui.widgets import guarded_paint
from attnviz.session.attention.layout import AXIS_BAND, Geometry, colour_ticks, geometry, tick_digits, zoomed

BAR_GAP = 10  # pixels between the cells and the colour bar


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
    masked: np.ndarray | None = None  # [R, C] True where the query may not look (future keys): not a zero weight
    signed: bool = False  # a diverging scale centred on zero (differences, BLEU lost)
    # [R, C] True where a sliding-window layer cannot look (keys farther back than its window): zero by construction
    outside: np.ndarray | None = None


def masked_spans(mask: np.ndarray, cells: QRect, g: Geometry) -> list[QRect]:
    """The rectangles (whole pixels) that cover ``mask``'s [R, C] True cells: one per run of a row, edges rounded
    from the cells' fractional ones so that neighbouring runs meet without a gap."""
    def edge(origin: int, size: float, k: int) -> int:
        return round(origin + k * size)

    spans = []
    for i in range(mask.shape[0]):
        columns = np.flatnonzero(mask[i])
        if not columns.size:
            continue
        breaks = np.flatnonzero(np.diff(columns) > 1)
        starts, ends = np.r_[columns[0], columns[breaks + 1]], np.r_[columns[breaks], columns[-1]]
        top, bottom = edge(cells.top(), g.cell_h, i), edge(cells.top(), g.cell_h, i + 1)
        for a, b in zip(starts, ends, strict=True):
            left, right = edge(cells.left(), g.cell_w, int(a)), edge(cells.left(), g.cell_w, int(b) + 1)
            spans.append(QRect(left, top, right - left, bottom - top))
    return spans


class HeatmapView(QWidget):
    """A labelled heatmap with a colour bar; hovering a cell shows the exact weight and the token pair.

    It fits the widget (``zoom`` None: cells as wide and as tall as the view allows, not necessarily square) or
    draws cells ``zoom`` pixels wide and asks for the room they need, so a scroll area around it scrolls. It says
    where it drew the cells (``map_rect``) and which labels (``drawn_labels``). The arrow keys move a current cell
    that a screen reader reads (``accessible_value``); Ctrl+wheel zooms.
    """

    hovered = Signal(int, int)  # row, column; -1, -1 when the pointer leaves
    zoom_changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("heatmapView")
        self.setAccessibleName("Attention heatmap")
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setMinimumSize(220, 180)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self._data: HeatmapData | None = None
        self._image: QImage | None = None
        self._cells = QRect()
        self._geometry: Geometry | None = None
        self._labels: list[DrawnLabel] = []
        self.zoom: float | None = None  # None: fit to the widget
        self.current: tuple[int, int] | None = None  # keyboard cell, read by screen readers
        self.placeholder = "Translate a sentence to see its attention"

    def set_data(self, data: HeatmapData | None) -> None:
        self._data = data
        self._image = (to_image(data.matrix, data.per_map, data.signed) if data is not None and data.matrix.size
                       else None)
        if self.current is not None and (data is None or self.current[0] >= data.matrix.shape[0]
                                         or self.current[1] >= data.matrix.shape[1]):
            self.current = None
        self._resize_for_zoom()
        self._relayout()
        self.update()
        announce(self)

    def data(self) -> HeatmapData | None:
        return self._data

    def map_rect(self) -> QRect:
        """Where the cells are drawn, in widget coordinates (empty when there is no map)."""
        return QRect(self._cells)

    def drawn_labels(self) -> list[DrawnLabel]:
        """The row and column labels drawn at the current size, with the text shown (elided or not)."""
        return list(self._labels)

    def sizeHint(self) -> QSize:
        return QSize(560, 440)

    # -- zoom --------------------------------------------------------------------------------------------------------

    def set_zoom(self, cell: float | None) -> None:
        """Cells ``cell`` pixels wide (scrolling when larger than the view), or None to fit the view."""
        self.zoom = None if cell is None else zoomed(cell, 1.0)
        self._resize_for_zoom()
        self._relayout()
        self.update()
        self.zoom_changed.emit()

    def zoom_by(self, factor: float) -> None:
        """Zoom from the current cell size (the fitted one the first time)."""
        g = self._geometry
        # from a fitted, non-square cell: zooming in enlarges both sides, zooming out shrinks both
        fitted = (max(g.cell_w, g.cell_h) if factor > 1 else g.cell) if g is not None else 24.0
        current = self.zoom if self.zoom is not None else fitted
        self.set_zoom(zoomed(current, factor))

    def _resize_for_zoom(self) -> None:
        if self.zoom is None or self._data is None:
            self.setMinimumSize(220, 180)
            return
        g = self._compute(self._data, self.fontMetrics(), self.width(), self.height())
        self.setMinimumSize(*g.size(*self._data.matrix.shape))

    def wheelEvent(self, event) -> None:  # noqa: N802
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier and self._data is not None:
            self.zoom_by(1.25 if event.angleDelta().y() > 0 else 0.8)
            event.accept()
        else:
            super().wheelEvent(event)

    # -- layout and painting -----------------------------------------------------------------------------------------

    def _compute(self, d: HeatmapData, metrics: QFontMetrics, width: int, height: int) -> Geometry:
        r, c = d.matrix.shape
        lo, hi = self.colour_range()
        digits = tick_digits(lo, hi)
        ticks = max(metrics.horizontalAdvance(f"{v:.{digits}f}") for v in (lo, hi))
        return geometry(width, height, r, c, [metrics.horizontalAdvance(t) for t in d.rows],
                        [metrics.horizontalAdvance(t) for t in d.cols], metrics.height(), bool(d.title), self.zoom,
                        right=BAR_GAP + 12 + 6 + ticks + 6)

    def _relayout(self) -> None:
        """Place cells and labels for the current size (also before the first paint, for hover and tests)."""
        d = self._data
        if d is None or not d.matrix.size:
            self._geometry, self._cells, self._labels = None, QRect(), []
            return
        g = self._geometry = self._compute(d, self.fontMetrics(), self.width(), self.height())
        r, c = d.matrix.shape
        self._cells = QRect(g.left, g.top, int(g.cell_w * c), int(g.cell_h * r))
        self._labels = plan_labels(d.rows, d.cols, self._cells, g, self.font(), d.highlight_row)

    def resizeEvent(self, event) -> None:  # noqa: N802
        self._relayout()

    @guarded_paint
    def paintEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        text_color = self.palette().color(QPalette.ColorRole.WindowText)
        if self._data is None or self._image is None:
            painter.setPen(text_color)
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.placeholder)
            return
        d = self._data
        self._relayout()
        cells, g = self._cells, self._geometry
        if g is None:  # an empty matrix has no image, so this cannot happen; it keeps the types honest
            return
        painter.drawImage(cells, self._image)
        self._draw_masked(painter, cells, d, g)
        painter.setPen(text_color)
        if d.title:
            title = painter.fontMetrics().elidedText(d.title, Qt.TextElideMode.ElideRight, self.width() - cells.left())
            painter.drawText(QRect(cells.left(), 2, self.width() - cells.left(), painter.fontMetrics().height() + 4),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, title)
        self._draw_labels(painter, g)
        self._draw_axis_titles(painter, cells, d, label_depth=g.col_band)
        self._draw_outlines(painter, cells, d, g)
        self._draw_colour_bar(painter, cells, text_color, d, g)

    def _draw_labels(self, painter: QPainter, g: Geometry) -> None:
        base = painter.font()
        fonts = {"row": scaled_font(base, g.row_scale), "column": scaled_font(base, g.col_scale)}
        right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
        for label in self._labels:
            painter.setFont(fonts[label.axis])
            box = label.rect
            if label.axis == "row":
                painter.drawText(box, right, label.text)
                continue
            painter.save()  # a column label runs bottom to top in its upright box, ending at the cells
            painter.translate(box.left() + box.width() / 2, box.top())
            painter.rotate(-90)
            painter.drawText(QRect(-box.height(), -box.width() // 2, box.height(), box.width()), right, label.text)
            painter.restore()
        painter.setFont(base)

    def _draw_masked(self, painter: QPainter, cells: QRect, d: HeatmapData, g: Geometry) -> None:
        """Cells a causal query may not see: grey with a hatch, so they do not read as a weight of zero; cells a
        sliding window leaves out: grey with the other diagonal."""
        for mask, pattern in ((d.masked, Qt.BrushStyle.BDiagPattern), (d.outside, Qt.BrushStyle.FDiagPattern)):
            if mask is None or not mask.any():
                continue
            painter.save()
            # whole pixels, without antialiasing, one rectangle per run of a row: cells drawn one by one at
            # fractional edges let the map's dark colour show through between them as thin lines
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
            painter.setPen(Qt.PenStyle.NoPen)
            spans = masked_spans(mask, cells, g)
            for brush in (QColor(150, 150, 150), QBrush(QColor(110, 110, 110), pattern)):
                painter.setBrush(brush)
                for span in spans:
                    painter.drawRect(span)
            painter.restore()

    def _draw_outlines(self, painter: QPainter, cells: QRect, d: HeatmapData, g: Geometry) -> None:
        r = d.matrix.shape[0]
        painter.setBrush(Qt.BrushStyle.NoBrush)
        if d.highlight_row is not None and 0 <= d.highlight_row < r:
            painter.setPen(QPen(QColor(255, 80, 80), 2))
            painter.drawRect(QRect(cells.left() - 1, int(cells.top() + d.highlight_row * g.cell_h) - 1,
                                   cells.width() + 2, int(g.cell_h) + 2))
        if self.current is not None and self.hasFocus():
            i, j = self.current
            painter.setPen(QPen(self.palette().color(QPalette.ColorRole.Highlight), 2, Qt.PenStyle.DashLine))
            painter.drawRect(QRectF(cells.left() + j * g.cell_w, cells.top() + i * g.cell_h, g.cell_w, g.cell_h))

    def _draw_axis_titles(self, painter: QPainter, cells: QRect, d: HeatmapData, label_depth: int) -> None:
        font = QFont(painter.font())
        font.setItalic(True)
        painter.setFont(font)
        painter.drawText(QRect(cells.center().x() - 200, cells.bottom() + label_depth + 6, 400, AXIS_BAND),
                         Qt.AlignmentFlag.AlignCenter, f"columns: {d.col_axis}")
        painter.save()
        painter.translate(AXIS_BAND // 2, cells.center().y())
        painter.rotate(-90)
        painter.drawText(QRect(-cells.height() // 2 - 60, -9, cells.height() + 120, 18), Qt.AlignmentFlag.AlignCenter,
                         f"rows: {d.row_axis}")
        painter.restore()
        font.setItalic(False)
        painter.setFont(font)

    def colour_range(self) -> tuple[float, float]:
        d = self._data
        if d is None:
            return 0.0, 1.0
        if d.signed:
            m = signed_limit(d.matrix)
            return -m, m
        return (float(d.matrix.min()), float(d.matrix.max())) if d.per_map else (0.0, 1.0)

    def _draw_colour_bar(self, painter: QPainter, cells: QRect, text_color: QColor, d: HeatmapData,
                         g: Geometry) -> None:
        bar = QRect(cells.right() + BAR_GAP, cells.top(), 12, max(cells.height(), 60))
        painter.drawImage(bar, scale_image(d.signed))  # stretched smoothly or not, each row its value's colour
        lo, hi = self.colour_range()
        digits = tick_digits(lo, hi)
        painter.setPen(text_color)
        half = painter.fontMetrics().height() // 2
        ticks = colour_ticks(lo, hi, max(2, min(5, bar.height() // (3 * half))))
        for value in ticks:
            y = bar.bottom() - (value - lo) / (hi - lo) * (bar.height() - 1) if hi > lo else bar.bottom()
            painter.drawLine(bar.right() + 1, int(y), bar.right() + 4, int(y))
            painter.drawText(QRect(bar.right() + 6, int(y) - half, g.right - BAR_GAP - 18, 2 * half),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, f"{value:.{digits}f}")

    # -- reading cells -----------------------------------------------------------------------------------------------

    def cell_at(self, pos: QPoint) -> tuple[int, int] | None:
        if self._data is None or not self._cells.contains(pos):
            return None
        r, c = self._data.matrix.shape
        row = int((pos.y() - self._cells.top()) / self._cells.height() * r)
        col = int((pos.x() - self._cells.left()) / self._cells.width() * c)
        return min(row, r - 1), min(col, c - 1)

    def label_at(self, pos: QPoint) -> str | None:
        """The full token under the pointer in the row or column label band (labels may be elided or thinned)."""
        d, cells = self._data, self._cells
        if d is None or cells.isEmpty():
            return None
        r, c = d.matrix.shape
        if pos.x() < cells.left() and cells.top() <= pos.y() < cells.bottom():
            i = min(int((pos.y() - cells.top()) / cells.height() * r), r - 1)
            return f"row {i + 1}: {d.rows[i]}"
        if pos.y() > cells.bottom() and cells.left() <= pos.x() < cells.right():
            j = min(int((pos.x() - cells.left()) / cells.width() * c), c - 1)
            return f"column {j + 1}: {d.cols[j]}"
        return None

    def describe_cell(self, row: int, col: int) -> str:
        d = self._data
        if d is None:
            return ""
        r, c = d.matrix.shape
        if d.masked is not None and d.masked[row, col]:
            weight = "masked (a future position this query may not see)"
        elif d.outside is not None and d.outside[row, col]:
            weight = "outside the layer's sliding window (zero by construction, not ignored by choice)"
        else:
            weight = f"weight {d.matrix[row, col]:.4f}"
        return f"row {row + 1} of {r} {d.rows[row]!r}, column {col + 1} of {c} {d.cols[col]!r}: {weight}"

    def accessible_value(self) -> str:
        d = self._data
        if d is None:
            return self.placeholder
        r, c = d.matrix.shape
        where = (self.describe_cell(*self.current) if self.current is not None else
                 f"{r} rows ({d.row_axis}) by {c} columns ({d.col_axis}); arrow keys read the cells")
        return f"{d.title}. {where}" if d.title else where

    def keyPressEvent(self, event) -> None:  # noqa: N802
        moves = {Qt.Key.Key_Up: (-1, 0), Qt.Key.Key_Down: (1, 0), Qt.Key.Key_Left: (0, -1), Qt.Key.Key_Right: (0, 1)}
        if self._data is None or event.key() not in moves or event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            super().keyPressEvent(event)
            return
        r, c = self._data.matrix.shape
        di, dj = moves[event.key()]
        i, j = self.current if self.current is not None else (0, 0)
        self.current = (min(max(i + di, 0), r - 1), min(max(j + dj, 0), c - 1)) if self.current else (0, 0)
        self.setToolTip(self.describe_cell(*self.current))
        self.update()
        announce(self)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        pos = event.position().toPoint()
        cell, d = self.cell_at(pos), self._data
        if cell is None or d is None:
            label = self.label_at(pos)
            if label:
                QToolTip.showText(event.globalPosition().toPoint(), label, self)
            else:
                QToolTip.hideText()
            self.hovered.emit(-1, -1)
            return
        row, col = cell
        QToolTip.showText(event.globalPosition().toPoint(),
                          f"{d.rows[row]} \u2192 {d.cols[col]}\n" + self.describe_cell(row, col).split(": ", 1)[1],
                          self)
        self.hovered.emit(row, col)

    def leaveEvent(self, event) -> None:  # noqa: N802
        self.hovered.emit(-1, -1)
