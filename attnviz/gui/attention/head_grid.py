"""The grid of every layer x head of one attention kind as small maps; heads can be switched off from it.

A click opens a head in the large view (``selected``). Ctrl+click a tile switches that head off or on again
(``toggled``); Ctrl+click a layer's label (or Ctrl+Shift+click any tile of it) switches the whole layer
(``layer_toggled``). From the keyboard: the arrow keys move a dashed cursor, Enter opens its head, Space switches
it, Shift+Space its layer. An off head is drawn crossed out on a hatched grey tile, and said so in its tooltip and
in the screen-reader text.

The grid is the secondary view, beside the large map: in a narrow, tall column it turns (a column per layer, a row
per head) when that gives larger tiles, it asks for the height its tiles need at its width, and a tile is never
larger than ``MAX_TILE`` (a one-head LSTM's single thumbnail stays a thumbnail, smaller than its large map). A
wide model (NLLB-600M: 12 layers x 16 heads per kind) would need tiles under ``MIN_TILE`` to show every layer at
once: the grid then shows a page of as many layers as fit at that size, with a bar above saying which ("Layers 1-6
of 12") and arrows to page; PageUp/PageDown page too, and moving the cursor or opening a head off the page turns it.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QRect, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QImage, QMouseEvent, QPainter, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from attnviz.gui.accessible import announce
from attnviz.gui.attention.colormap import to_images
from attnviz.gui.widgets import guarded_paint

LABEL_W, LABEL_H, GAP = 26, 16, 4
MAX_TILE = 120
MIN_TILE = 20  # smaller, a map is a smudge: the grid pages its layers instead
PAGE_H = 18  # the bar that says which layers a page shows


def tile_fit(width: float, height: float, cols: int, rows: int) -> int:
    """The side of square tiles in ``cols`` x ``rows`` that fit ``width`` x ``height`` with labels and gaps."""
    side = min((width - LABEL_W - GAP * cols) / cols, (height - LABEL_H - GAP * rows) / rows, MAX_TILE)
    return max(4, int(side))


class HeadGrid(QWidget):
    selected = Signal(int, int)  # layer, head: open it in the large view
    toggled = Signal(int, int)  # layer, head: switch it off (or on again)
    layer_toggled = Signal(int)  # layer: switch every head of it

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("headGrid")
        self.setAccessibleName("All layers and heads")
        self.setMinimumSize(120, 80)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self.transposed = False  # True: a column per layer and a row per head (a narrow, tall place)
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self._images: list[list[QImage]] = []
        self._current: tuple[int, int] | None = None
        self._marked: tuple[int, int] | None = None
        self._tiles: dict[tuple[int, int], QRect] = {}
        self._layer_labels: dict[int, QRect] = {}
        self._head_labels: dict[int, QRect] = {}
        self.off: set[tuple[int, int]] = set()  # (layer, head) switched off, of the kind shown
        self.cursor_head: tuple[int, int] | None = None  # keyboard cursor
        self.first_layer, self.page_layers = 0, 0  # the layers shown: all of them unless their tiles are too small
        self.lines = 1  # lines of tiles a layer takes: more when one line of its heads would be too small
        self._page_arrows: dict[int, QRect] = {}  # -1 / +1 -> the arrow that pages back / on
        self.kv_heads = 0  # grouped-query attention: key/value heads, each shared by heads // kv_heads query heads

    def set_maps(self, maps: np.ndarray | None, per_map: bool = False, current: tuple[int, int] | None = None,
                 marked: tuple[int, int] | None = None, off: set[tuple[int, int]] | None = None,
                 signed: bool = False, outside: list[np.ndarray | None] | None = None) -> None:
        """``maps`` [L, H, R, C]; ``current`` (layer, head) is outlined; ``marked`` is the head the model was trained
        to align with (guided alignment), drawn with a gold dashed frame; ``off`` heads are crossed out; ``signed``
        maps (an attribution) use the diverging scale centred on zero, as the large map does; ``outside`` per layer
        [R, C] (or None) marks the cells its sliding window leaves out, striped grey as the large map hatches them."""
        before = self.shape()
        self._images = [] if maps is None else to_images(np.asarray(maps), per_map, signed, outside)
        if current is not None and current != self._current and current[0] not in self.shown_layers():
            self.first_layer = current[0]  # a head opened elsewhere (the large view) is shown here; clamped below
        self._current, self._marked, self.off = current, marked, set(off or ())
        if self.cursor_head is not None and (maps is None or self.cursor_head[0] >= maps.shape[0]
                                        or self.cursor_head[1] >= maps.shape[1]):
            self.cursor_head = None
        self.setAccessibleDescription("" if marked is None else
                                      f"Layer {marked[0] + 1}, head {marked[1] + 1} was trained to align words")
        self._relayout()
        if self.shape() != before:
            self.updateGeometry()  # the height the tiles need depends on the model's layers and heads
        self.update()
        announce(self)

    def sizeHint(self) -> QSize:
        return QSize(240, self.heightForWidth(240))

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        """The height the tiles need at ``width`` (laid out as they fit best in a column of that width)."""
        layers, heads = self.shape()
        if not layers:
            return 160
        side, turned, shown = self.arrangement(width, 10_000)
        rows = heads if turned else shown
        return LABEL_H + rows * (side + GAP) + (PAGE_H if shown < layers else 0)

    def arrangement(self, width: float, height: float) -> tuple[int, bool, int]:
        """(tile side, turned, layers shown) in ``width`` x ``height`` (``plan`` says how)."""
        return self.plan(width, height)[:3]

    def plan(self, width: float, height: float) -> tuple[int, bool, int, int]:
        """(tile side, turned, layers shown, lines per layer) in ``width`` x ``height``: every layer when their
        tiles reach ``MIN_TILE``, else as many as fit at that size (at least one), under the page bar. When even
        one layer's heads in one line would be smaller (16 heads in a 1024x700 window's narrow column), each layer
        wraps its heads onto 2, 3... lines, the fewest that reach it."""
        layers, heads = self.shape()

        def best(shown: int, room: float, lines: int) -> tuple[int, bool]:
            per_line = -(-heads // lines)
            normal = tile_fit(width, room, per_line, shown * lines)
            turned = tile_fit(width, room, shown * lines, per_line)
            return (turned, True) if turned > normal else (normal, False)

        first = None
        for lines in range(1, max(heads, 1) + 1):
            if lines > 1 and -(-heads // lines) == -(-heads // (lines - 1)):
                continue  # the same number of tiles a line: no larger than the last try
            side, turned = best(layers, height, lines)
            shown = layers
            while side < MIN_TILE and shown > 1:
                shown -= 1
                side, turned = best(shown, height - PAGE_H, lines)
            first = first or (side, turned, shown, lines)
            if side >= MIN_TILE:
                return side, turned, shown, lines
        return first or (4, False, layers, 1)  # nothing reaches MIN_TILE: one line a layer, as small as it must

    def page(self, step: int) -> None:
        """Show the previous (``step`` -1) or next (+1) page of layers."""
        self.first_layer += step * max(self.page_layers, 1)
        self._relayout()
        self.update()
        announce(self)

    def shown_layers(self) -> range:
        return range(self.first_layer, self.first_layer + self.page_layers)

    def tile_size(self) -> QSize:
        """The size of one tile as laid out now (empty before any maps)."""
        return self._tiles[(0, 0)].size() if self._tiles else QSize()

    def shape(self) -> tuple[int, int]:
        return (len(self._images), len(self._images[0])) if self._images else (0, 0)

    def tile_rect(self, layer: int, head: int) -> QRect:
        return self._tiles[(layer, head)]

    def layer_label_rect(self, layer: int) -> QRect:
        return self._layer_labels[layer]

    def _relayout(self) -> None:
        self._tiles.clear()
        self._layer_labels.clear()
        self._head_labels.clear()
        self._page_arrows.clear()
        layers, heads = self.shape()
        if not layers:
            return
        size, self.transposed, self.page_layers, self.lines = self.plan(self.width(), self.height())
        self.first_layer = min(max(self.first_layer, 0), layers - self.page_layers)
        top = 0
        if self.page_layers < layers:  # the page bar: its arrows at either end
            top = PAGE_H
            self._page_arrows = {-1: QRect(0, 0, LABEL_W, PAGE_H), 1: QRect(self.width() - LABEL_W, 0, LABEL_W, PAGE_H)}
        first, lines, per_line = self.first_layer, self.lines, -(-heads // self.lines)
        block = lines * (size + GAP) - GAP  # a layer's lines of tiles
        for layer in self.shown_layers():
            for h in range(heads):
                along, line = h % per_line, (layer - first) * lines + h // per_line  # a wrapped head: the next line
                col, row = (line, along) if self.transposed else (along, line)
                self._tiles[(layer, h)] = QRect(LABEL_W + col * (size + GAP), top + LABEL_H + row * (size + GAP),
                                                size, size)
        for layer in self.shown_layers():  # a layer's label heads its lines (columns, turned); a head's the other
            tile = self._tiles[(layer, 0)]
            self._layer_labels[layer] = QRect(tile.left(), top, block, LABEL_H) if self.transposed else \
                QRect(0, tile.top(), LABEL_W - 2, block)
        for h in range(per_line):
            tile = self._tiles[(first, h)]
            self._head_labels[h] = QRect(0, tile.top(), LABEL_W - 2, size) if self.transposed else \
                QRect(tile.left(), top, size, LABEL_H)

    def head_label(self, along: int) -> str:
        """The label of the ``along``-th tile of a line: its head ("H3"), or each line's there ("3/11") when a
        layer's heads wrap."""
        heads, per_line = self.shape()[1], -(-self.shape()[1] // self.lines)
        if self.lines == 1:
            return f"H{along + 1}"
        return "/".join(str(h + 1) for h in range(along, heads, per_line))

    def resizeEvent(self, event) -> None:  # noqa: N802
        self._relayout()

    @guarded_paint
    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        self._relayout()
        if not self._images:
            return
        text = self.palette().color(QPalette.ColorRole.WindowText)
        painter.setPen(text)
        if self._page_arrows:
            shown, room = self.shown_layers(), self.width() - 2 * LABEL_W
            bar = f"Layers {shown.start + 1}\u2013{shown.stop} of {self.shape()[0]}"
            if painter.fontMetrics().horizontalAdvance(bar) > room:  # a narrow column: the short form
                bar = f"L{shown.start + 1}\u2013{shown.stop} / {self.shape()[0]}"
            painter.drawText(QRect(LABEL_W, 0, room, PAGE_H), Qt.AlignmentFlag.AlignCenter, bar)
            for step, rect in self._page_arrows.items():  # PageUp / PageDown do the same (tooltip, screen reader)
                painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, "\u25c0" if step < 0 else "\u25b6")
        for h, label in self._head_labels.items():
            painter.drawText(label, Qt.AlignmentFlag.AlignCenter, self.head_label(h))
        for layer, label in self._layer_labels.items():
            painter.setPen(text)
            all_off = all((layer, h) in self.off for h in range(self.shape()[1]))
            painter.drawText(label, Qt.AlignmentFlag.AlignCenter, f"L{layer + 1}" + ("\u00d7" if all_off else ""))
        self._draw_groups(painter)
        for (layer, h), tile in self._tiles.items():
            painter.drawImage(tile, self._images[layer][h])
            if (layer, h) in self.off:
                self._draw_off(painter, tile)
            if self._marked == (layer, h):
                painter.setPen(QPen(QColor(230, 180, 30), 2, Qt.PenStyle.DashLine))
                painter.drawRect(tile.adjusted(-3, -3, 3, 3))
            if self._current == (layer, h):
                painter.setPen(QPen(QColor(255, 80, 80), 2))
                painter.drawRect(tile.adjusted(-1, -1, 1, 1))
            if self.cursor_head == (layer, h) and self.hasFocus():
                painter.setPen(QPen(self.palette().color(QPalette.ColorRole.Highlight), 2, Qt.PenStyle.DashLine))
                painter.drawRect(tile.adjusted(-2, -2, 2, 2))

    def _draw_groups(self, painter: QPainter) -> None:
        """A line between neighbouring heads of different key/value groups (grouped-query attention)."""
        if self.group_of(0) is None:
            return
        painter.save()
        painter.setPen(QPen(self.palette().color(QPalette.ColorRole.Mid), 1))
        for (layer, h), tile in self._tiles.items():
            before = self._tiles.get((layer, h - 1))
            if h and before is not None and self.group_of(h) != self.group_of(h - 1):
                if self.transposed and before.bottom() < tile.top():
                    y = (before.bottom() + tile.top()) // 2
                    painter.drawLine(tile.left() - 2, y, tile.right() + 2, y)
                elif not self.transposed and before.right() < tile.left():
                    x = (before.right() + tile.left()) // 2
                    painter.drawLine(x, tile.top() - 2, x, tile.bottom() + 2)
        painter.restore()

    @staticmethod
    def _draw_off(painter: QPainter, tile: QRect) -> None:
        """A switched-off head: hatched grey over its (all-zero) map and a cross, so it cannot pass for a map."""
        painter.save()
        painter.fillRect(tile, QColor(150, 150, 150))
        painter.fillRect(tile, QBrush(QColor(90, 90, 90), Qt.BrushStyle.BDiagPattern))
        painter.setPen(QPen(QColor(200, 30, 30), 2))
        painter.drawLine(tile.topLeft(), tile.bottomRight())
        painter.drawLine(tile.topRight(), tile.bottomLeft())
        painter.restore()

    # -- reading and input -------------------------------------------------------------------------------------------

    def set_groups(self, kv_heads: int) -> None:
        """The model's key/value heads (0 or the head count: no grouped-query attention): each group's heads are
        named together and set apart by a line."""
        self.kv_heads = kv_heads
        self.update()

    def group_of(self, head: int) -> tuple[int, int, int] | None:
        """(group, its first head, its last head), 0-based, of a query head that shares its keys and values."""
        heads = self.shape()[1]
        if not self.kv_heads or self.kv_heads >= heads or heads % self.kv_heads:
            return None
        size = heads // self.kv_heads
        return head // size, head // size * size, head // size * size + size - 1

    def describe(self, layer: int, head: int) -> str:
        state = ", switched off" if (layer, head) in self.off else ""
        aligned = " (trained to align words: guided alignment)" if self._marked == (layer, head) else ""
        group = self.group_of(head)
        shared = "" if group is None else (f", key/value group {group[0] + 1} of {self.kv_heads} (shared by heads "
                                           f"{group[1] + 1}-{group[2] + 1})")
        return f"Layer {layer + 1}, head {head + 1}{shared}{state}{aligned}"

    def accessible_value(self) -> str:
        layers, heads = self.shape()
        if not layers:
            return "No attention yet"
        where = self.describe(*self.cursor_head) if self.cursor_head else "arrow keys move between heads"
        off = f"{len(self.off)} heads switched off. " if self.off else ""
        shown = self.shown_layers()
        page = (f"Showing layers {shown.start + 1} to {shown.stop}: Page Up and Page Down show the others. "
                if self.page_layers and self.page_layers < layers else "")
        return (f"{layers} layers by {heads} heads. {page}{off}{where}. Enter opens a head, Space switches it off or "
                "on, Shift+Space its whole layer")

    def _tile_at(self, pos) -> tuple[int, int] | None:
        return next((key for key, tile in self._tiles.items() if tile.contains(pos)), None)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        pos, mods = event.position().toPoint(), event.modifiers()
        ctrl = bool(mods & Qt.KeyboardModifier.ControlModifier)
        arrow = next((step for step, rect in self._page_arrows.items() if rect.contains(pos)), None)
        if arrow is not None:
            self.page(arrow)
            return
        label = next((layer for layer, rect in self._layer_labels.items() if rect.contains(pos)), None)
        if label is not None and ctrl:
            self.layer_toggled.emit(label)
            return
        tile = self._tile_at(pos)
        if tile is None:
            return
        if ctrl and mods & Qt.KeyboardModifier.ShiftModifier:
            self.layer_toggled.emit(tile[0])
        elif ctrl:
            self.toggled.emit(*tile)
        else:
            self.selected.emit(*tile)

    def keyPressEvent(self, event) -> None:  # noqa: N802
        layers, heads = self.shape()
        moves = {Qt.Key.Key_Up: (-1, 0), Qt.Key.Key_Down: (1, 0), Qt.Key.Key_Left: (0, -1), Qt.Key.Key_Right: (0, 1)}
        key, mods = event.key(), event.modifiers()
        if not layers or mods & (Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier):
            super().keyPressEvent(event)
        elif key in moves:
            layer, head = self.cursor_head or (0, 0)
            dl, dh = moves[key] if self.cursor_head else (0, 0)
            if self.transposed:  # layers run across, heads down
                dl, dh = dh, dl
            self.cursor_head = (min(max(layer + dl, 0), layers - 1), min(max(head + dh, 0), heads - 1))
            if self.cursor_head[0] not in self.shown_layers():  # the cursor left the page: turn it
                self.page(1 if self.cursor_head[0] >= self.shown_layers().stop else -1)
            self.setToolTip(self.describe(*self.cursor_head))
            self.update()
            announce(self)
        elif key in (Qt.Key.Key_PageUp, Qt.Key.Key_PageDown):
            self.page(-1 if key == Qt.Key.Key_PageUp else 1)
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.cursor_head:
            self.selected.emit(*self.cursor_head)
        elif key == Qt.Key.Key_Space and self.cursor_head:
            if mods & Qt.KeyboardModifier.ShiftModifier:
                self.layer_toggled.emit(self.cursor_head[0])
            else:
                self.toggled.emit(*self.cursor_head)
        else:
            super().keyPressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        tile = self._tile_at(event.position().toPoint())
        if tile is not None:
            QToolTip.showText(event.globalPosition().toPoint(), self.describe(*tile) + ": click to open it in the "
                              "large view; Ctrl+click switches it off or on, Ctrl+Shift+click its whole layer", self)
