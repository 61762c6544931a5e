"""The search tree drawn: columns are steps, nodes the tokens with their probability, edges weighted by it.

It paints an ``engine.search.tree.SearchTree`` as it grows (a beam search's ``BeamStep``s one by one, a greedy path,
what-if branches): the chosen hypothesis in orange, finished hypotheses with a green frame, pruned candidates
faded and dashed, each what-if branch in purple with its label. Clicking a node, or Enter on the keyboard cursor,
emits ``activated(node id)``; the arrow keys move the cursor (Left: parent, Right: first child, Up/Down: the
neighbours in the step) and a screen reader reads the node under it ("step 3, 'dogs', p 0.42, pruned").

Layout: columns are steps; the chosen hypothesis reads along the top row, the other candidates of a step sit below
it grouped by parent, and each what-if branch has a band of its own beneath the search (one row for a greedy
branch, a few for a beam search), so a beam of width k needs about 2k rows however long the sentence is.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QMouseEvent, QPainter, QPainterPath, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from attnviz.engine.events import BeamNode
from attnviz.engine.search.tree import ROOT, SearchTree
from attnviz.gui.accessible import announce
from attnviz.gui.widgets import guarded_paint

COL_W, NODE_W, ROW_H, NODE_H, PAD = 112, 100, 22, 18, 4  # px; a row: a node and 4 px, so 6 rows take 132 px
CHOSEN, FINISHED, BRANCH = QColor(230, 120, 20), QColor(40, 150, 60), QColor(130, 60, 200)


class BeamTreeView(QWidget):
    activated = Signal(int)  # node id: show this hypothesis
    cursor_moved = Signal(QRect)  # the cursor's node rectangle, for the scroll area to keep it visible
    laid_out = Signal(int)  # the tree's rows after it grew (or was cleared): the page sizes its view from them

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("beamTree")
        self.setAccessibleName("Search tree")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.tree: SearchTree | None = None
        self.selected: int | None = None  # the hypothesis shown in the other views
        self.cursor_node: int | None = None  # keyboard cursor
        self.placeholder = "Decode to see the search tree; beam search shows every candidate"
        self._pos: dict[int, tuple[int, int]] = {}  # node id -> (column, row)
        self._children: dict[int, list[int]] = {}
        self._chosen_path: set[int] = set()

    # -- data --------------------------------------------------------------------------------------------------------

    def set_tree(self, tree: SearchTree | None) -> None:
        self.tree, self.selected, self.cursor_node = tree, None, None
        self.refresh()

    def refresh(self) -> None:
        """Lay the tree out again (it grew) and repaint."""
        self._layout()
        rows = max((r for _, r in self._pos.values()), default=0) + 1
        cols = max((c for c, _ in self._pos.values()), default=0) + 1
        self.setMinimumSize(max(200, 2 * PAD + cols * COL_W), max(80, 2 * PAD + rows * ROW_H))
        self.laid_out.emit(rows)
        self.update()
        announce(self)

    def select(self, node_id: int | None) -> None:
        """Mark ``node_id`` as the hypothesis shown (no signal); the cursor follows it."""
        self.selected = node_id
        if node_id is not None:
            self.cursor_node = node_id
            self.cursor_moved.emit(self.node_rect(node_id))
        self.update()
        announce(self)

    def _layout(self) -> None:
        """Columns are steps. In each column the search's nodes are ranked: the chosen hypothesis' node first
        (so it reads along the top row), then by their parent's row (siblings together, edges short), live before
        pruned, then by score. Each what-if branch gets a band of rows of its own below them, laid out the same way:
        one row for a greedy branch, so it reads as one straight line, a few for a beam search."""
        self._pos.clear()
        self._children.clear()
        if self.tree is None:
            return
        nodes = self.tree.nodes
        self._chosen_path = self.tree.on_path(self.tree.chosen)
        columns: dict[tuple[int, int], list[int]] = {}  # (branch, column) -> node ids
        for node in nodes.values():
            self._children.setdefault(node.parent, []).append(node.id)
            columns.setdefault((node.branch, node.step.index + 1), []).append(node.id)
        self._pos[ROOT] = (0, 0)
        top = 0
        for branch in sorted({b for b, _ in columns}):  # a branch's parent lies in the search or an earlier branch
            height = 0
            for col in sorted(c for b, c in columns if b == branch):
                ranked = sorted(columns[(branch, col)], key=lambda i: (
                    i not in self._chosen_path, self._pos[nodes[i].parent][1], nodes[i].status == "pruned",
                    -nodes[i].score, i))
                self._pos.update((i, (col, top + row)) for row, i in enumerate(ranked))
                height = max(height, len(ranked))
            top += height
        self._children = {k: sorted(v, key=lambda i: self._pos[i][1]) for k, v in self._children.items()}

    @property
    def _nodes(self) -> dict[int, BeamNode]:
        """The tree's nodes (none without a tree)."""
        return self.tree.nodes if self.tree is not None else {}

    def node_ids(self) -> list[int]:
        """Every node drawn, the root (-1) excluded."""
        return [i for i in self._pos if i != ROOT]

    def node_rect(self, node_id: int) -> QRect:
        col, row = self._pos.get(node_id, (0, 0))
        return QRect(PAD + col * COL_W, PAD + row * ROW_H + (ROW_H - NODE_H), NODE_W, NODE_H)

    def node_at(self, pos) -> int | None:
        return next((i for i in self._pos if i != ROOT and self.node_rect(i).contains(pos)), None)

    def describe(self, node_id: int) -> str:
        node = self._nodes[node_id]
        parts = [f"step {node.step.index + 1}", repr(node.step.token), f"p {node.step.probability:.2f}", node.status]
        if node_id in self._chosen_path:
            parts.append("on the chosen translation")
        if node.branch:
            parts.append(f"what-if branch {node.branch}")
        if node.normalised is not None:
            parts.append(f"normalised score {node.normalised:.3f}")
        return ", ".join(parts) + f", log-probability {node.score:.3f}"

    def accessible_value(self) -> str:
        if self.tree is None or not self.tree.nodes:
            return self.placeholder
        node = self.cursor_node if self.cursor_node is not None else self.selected
        where = self.describe(node) if node is not None else "arrow keys move between nodes, Enter shows one"
        return f"{len(self.tree.nodes)} nodes. {where}"

    def sizeHint(self) -> QSize:
        return QSize(420, 220)

    # -- painting ----------------------------------------------------------------------------------------------------

    @guarded_paint
    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        if self.tree is None or not self.tree.nodes:
            painter.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(self.rect().adjusted(6, 0, -6, 0), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
                             self.placeholder)
            return
        # only what the scroll area shows: a long beam search's thousands of nodes made every repaint slow
        exposed = event.rect().adjusted(-COL_W, -ROW_H, COL_W, ROW_H)
        self._draw_node(painter, ROOT, "<sos>")
        shown = [i for i in self.node_ids() if self.node_rect(i).united(self.node_rect(self._nodes[i].parent))
                 .intersects(exposed)]
        for node_id in shown:
            self._draw_edge(painter, node_id)
        for node_id in shown:
            if self.node_rect(node_id).intersects(exposed):
                node = self.tree.nodes[node_id]
                self._draw_node(painter, node_id, f"{node.step.token} {node.step.probability:.2f}")
        self._draw_branch_labels(painter)

    def _draw_edge(self, painter: QPainter, node_id: int) -> None:
        node = self._nodes[node_id]
        a, b = self.node_rect(node.parent), self.node_rect(node_id)
        start, end = QPointF(a.right(), a.center().y()), QPointF(b.left(), b.center().y())
        p = max(0.0, min(1.0, node.step.probability))
        colour = QColor(CHOSEN if node_id in self._chosen_path else BRANCH if node.branch else
                        self.palette().color(QPalette.ColorRole.WindowText))
        colour.setAlpha(int(70 + 185 * p) if node.status != "pruned" else 50)
        path = QPainterPath(start)
        mid = (start.x() + end.x()) / 2
        path.cubicTo(QPointF(mid, start.y()), QPointF(mid, end.y()), end)
        painter.setPen(QPen(colour, 1 + 4 * p))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(path)

    def _draw_node(self, painter: QPainter, node_id: int, text: str) -> None:
        pal, rect = self.palette(), self.node_rect(node_id)
        node = self._nodes.get(node_id)
        pruned = node is not None and node.status == "pruned"
        painter.setOpacity(0.4 if pruned else 1.0)
        fill = pal.color(QPalette.ColorRole.AlternateBase)
        border = QPen(pal.color(QPalette.ColorRole.Mid), 1, Qt.PenStyle.DashLine if pruned else Qt.PenStyle.SolidLine)
        if node is not None and node.branch:
            fill, border = QColor(235, 222, 250), QPen(BRANCH, 2)
        if node_id in self._chosen_path:
            fill, border = QColor(255, 226, 196), QPen(CHOSEN, 2.5)
        if node is not None and node.status == "finished":
            border.setColor(FINISHED)
            border.setWidthF(3)
        text_colour = QColor(20, 20, 20) if fill.lightness() > 128 else QColor(240, 240, 240)
        if node_id == self.selected:
            fill, text_colour = pal.color(QPalette.ColorRole.Highlight), pal.color(QPalette.ColorRole.HighlightedText)
        painter.setBrush(fill)
        painter.setPen(border)
        painter.drawRoundedRect(rect, 5, 5)
        painter.setPen(text_colour)
        painter.drawText(rect.adjusted(4, 0, -4, 0), Qt.AlignmentFlag.AlignCenter,
                         painter.fontMetrics().elidedText(text, Qt.TextElideMode.ElideMiddle, rect.width() - 8))
        painter.setOpacity(1.0)
        if node_id == self.cursor_node and self.hasFocus():
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 2, Qt.PenStyle.DotLine))
            painter.drawRoundedRect(rect.adjusted(-3, -3, 3, 3), 6, 6)

    def _draw_branch_labels(self, painter: QPainter) -> None:
        font = QFont(painter.font())
        font.setPointSizeF(max(6.0, font.pointSizeF() * 0.8))
        painter.setFont(font)
        painter.setPen(BRANCH)
        for node_id in self.node_ids():
            node = self._nodes[node_id]
            parent = self._nodes.get(node.parent)
            if node.branch and (parent is None or parent.branch != node.branch):
                rect = self.node_rect(node_id)
                painter.drawText(QRect(rect.left(), rect.top() - (ROW_H - NODE_H), COL_W * 2, ROW_H - NODE_H),
                                 Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom, f"what-if {node.branch}")

    # -- input -------------------------------------------------------------------------------------------------------

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        node_id = self.node_at(event.position().toPoint())
        if node_id is not None:
            self.cursor_node = node_id
            self.activated.emit(node_id)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        node_id = self.node_at(event.position().toPoint())
        if node_id is not None:
            QToolTip.showText(event.globalPosition().toPoint(), self.describe(node_id) + ". Click to show it.", self)

    def keyPressEvent(self, event) -> None:  # noqa: N802
        if self.tree is None or not self.tree.nodes or event.modifiers() & (
                Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier):
            super().keyPressEvent(event)
            return
        key, cursor = event.key(), self.cursor_node
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and cursor is not None:
            self.activated.emit(cursor)
            return
        target = self._move(key, cursor)
        if target is None:
            super().keyPressEvent(event)
            return
        self.cursor_node = target
        self.setToolTip(self.describe(target))
        self.cursor_moved.emit(self.node_rect(target))
        self.update()
        announce(self)

    def _move(self, key, cursor: int | None) -> int | None:
        first = self._children.get(ROOT, [None])[0]
        if cursor is None or cursor not in self._pos:
            return first if key in (Qt.Key.Key_Left, Qt.Key.Key_Right, Qt.Key.Key_Up, Qt.Key.Key_Down) else None
        if key == Qt.Key.Key_Left:
            parent = self._nodes[cursor].parent
            return parent if parent != ROOT else cursor
        if key == Qt.Key.Key_Right:
            return (self._children.get(cursor) or [cursor])[0]
        if key in (Qt.Key.Key_Up, Qt.Key.Key_Down):
            col, row = self._pos[cursor]
            column = sorted((r, i) for i, (c, r) in self._pos.items() if c == col and i != ROOT)
            rows = [i for _, i in column]
            step = -1 if key == Qt.Key.Key_Up else 1
            return rows[min(max(rows.index(cursor) + step, 0), len(rows) - 1)]
        return None
