"""Live training curves drawn with QPainter: cheap enough to redraw several times a second while a model trains.

A ``CurvePlot`` holds named series of (x, y) points, draws them with labelled axes, 1-2-5 ticks, an optional log
scale and a legend, and shows the nearest point's exact value on hover. ``CurvesPanel`` arranges the four training
plots and exports them together as PNG, SVG or CSV.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPaintDevice, QPainter, QPainterPath, QPalette, QPen
from PySide6.QtWidgets import QFileDialog, QGridLayout, QMessageBox, QSizePolicy, QToolTip, QWidget

from attnviz.gui.widgets import guarded_paint
from attnviz.session.train.run_document import EvaluationAdded, RunChange, RunCleared, StepsAdded

BLEU_WORDS = "BLEU (tokenised)"  # the evaluations' bleu_tok, said as a reader would


@dataclass
class Series:
    name: str
    color: str
    width: float = 1.6
    markers: bool = False  # draw a dot at every point (sparse series such as evaluations)
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)

    def add(self, x: float, y: float) -> None:
        self.xs.append(float(x))
        self.ys.append(float(y))


def nice_ticks(low: float, high: float, count: int = 5, least_step: float = 0.0) -> list[float]:
    """About ``count`` round values (1, 2 or 5 times a power of ten, at least ``least_step`` apart) covering
    [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = max(next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw), least_step)
    first = math.ceil(low / step - 1e-9) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def format_value(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e4 or abs(value) < 1e-3:
        return f"{value:.2e}"
    return f"{value:.4g}"


class CurvePlot(QWidget):
    """Line chart of one or more series against a shared x axis."""

    MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 62, 14, 26, 40

    def __init__(self, title: str, x_label: str, y_label: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.title, self.x_label, self.y_label = title, x_label, y_label
        self.series: list[Series] = []
        self.log_y = False
        self.empty_text = "No data yet"
        self.setMouseTracking(True)
        self.setMinimumSize(200, 130)  # four fit a 1024x700 window; smaller, the panel scrolls
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setAccessibleName(title)
        self._plot = QRectF()
        self.legend_rect = QRectF()  # where the legend was drawn (empty: none), above the plot

    def add_series(self, series: Series) -> Series:
        self.series.append(series)
        return series

    def clear(self) -> None:
        for s in self.series:
            s.xs.clear()
            s.ys.clear()
        self.update()

    def set_log_y(self, on: bool) -> None:
        self.log_y = on
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(420, 240)

    # -- geometry ----------------------------------------------------------------------------------------------------

    def _points(self, s: Series) -> list[tuple[float, float]]:
        return [(x, y) for x, y in zip(s.xs, s.ys) if math.isfinite(y) and (y > 0 or not self.log_y)]

    def _ranges(self) -> tuple[float, float, float, float] | None:
        pts = [p for s in self.series for p in self._points(s)]
        if not pts:
            return None
        xs, ys = [p[0] for p in pts], [self._ty(p[1]) for p in pts]
        x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
        if x1 == x0:
            x0, x1 = x0 - 1, x1 + 1
        pad = (y1 - y0) * 0.06 or (abs(y0) * 0.1 if y0 else 1.0)
        return x0, x1, y0 - pad, y1 + pad

    def _ty(self, y: float) -> float:
        return math.log10(y) if self.log_y else y

    def _map(self, x: float, y: float, r: tuple[float, float, float, float]) -> QPointF:
        x0, x1, y0, y1 = r
        p = self._plot
        return QPointF(p.left() + (x - x0) / (x1 - x0) * p.width(),
                       p.bottom() - (self._ty(y) - y0) / (y1 - y0) * p.height())

    # -- painting ----------------------------------------------------------------------------------------------------

    @guarded_paint
    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        self.paint(painter, self.rect().size())

    def paint(self, painter: QPainter, size: QSize) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        text = self.palette().color(QPalette.ColorRole.WindowText)
        grid = QColor(text)
        grid.setAlpha(40)
        r = self._ranges()
        height = size.height() - self.MARGIN_TOP - self.MARGIN_BOTTOM
        # room for the widest tick label ("4.00e-04") beside the axis title, so neither is clipped
        ticks = [label for _, label in self._y_ticks(r, height)] if r is not None else []
        left = max([self.MARGIN_LEFT] + [24 + painter.fontMetrics().horizontalAdvance(t) + 8 for t in ticks])
        self._plot = QRectF(left, self.MARGIN_TOP, size.width() - left - self.MARGIN_RIGHT, height)
        p = self._plot
        font = painter.font()
        bold = painter.font()
        bold.setBold(True)
        painter.setPen(text)
        legend_left = self._draw_legend(painter, text, size.width())  # in the title's row, never over the curves
        painter.setPen(text)
        painter.setFont(bold)
        room = QRectF(0, 2, legend_left - 4, self.MARGIN_TOP - 4)
        painter.drawText(room, Qt.AlignmentFlag.AlignCenter,
                         painter.fontMetrics().elidedText(self.title, Qt.TextElideMode.ElideRight, int(room.width())))
        painter.setFont(font)
        painter.drawText(QRectF(p.left(), size.height() - 18, p.width(), 16), Qt.AlignmentFlag.AlignCenter,
                         self.x_label)
        painter.save()
        painter.translate(10, p.center().y())
        painter.rotate(-90)
        # the whole height is the axis title's, not only the plot's: a short plot clipped it to "s (nats/tok"
        reach = 2 * min(p.center().y(), size.height() - p.center().y()) - 4
        painter.drawText(QRectF(-reach / 2, -8, reach, 16), Qt.AlignmentFlag.AlignCenter,
                         painter.fontMetrics().elidedText(self.y_label + (" (log)" if self.log_y else ""),
                                                          Qt.TextElideMode.ElideRight, int(reach)))
        painter.restore()
        if r is None:
            painter.drawText(p, Qt.AlignmentFlag.AlignCenter, self.empty_text)
            return
        self._draw_grid(painter, r, text, grid)
        painter.setClipRect(p.adjusted(-3, -3, 3, 3))
        for s in self.series:
            self._draw_series(painter, s, r)
        painter.setClipping(False)

    def _draw_grid(self, painter: QPainter, r, text: QColor, grid: QColor) -> None:
        x0, x1, y0, y1 = r
        p = self._plot
        painter.setPen(QPen(grid, 1))
        painter.drawRect(p)
        for x in self.x_ticks(r, p.width()):
            px = self._map(x, 1.0, r).x()
            painter.setPen(QPen(grid, 1))
            painter.drawLine(QPointF(px, p.top()), QPointF(px, p.bottom()))
            painter.setPen(text)
            painter.drawText(QRectF(px - 40, p.bottom() + 2, 80, 16), Qt.AlignmentFlag.AlignCenter, format_value(x))
        for ty, label in self._y_ticks(r, p.height()):
            py = p.bottom() - (ty - y0) / (y1 - y0) * p.height()
            painter.setPen(QPen(grid, 1))
            painter.drawLine(QPointF(p.left(), py), QPointF(p.right(), py))
            painter.setPen(text)
            painter.drawText(QRectF(0, py - 8, p.left() - 4, 16),
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, label)

    def x_ticks(self, r, width: float) -> list[float]:
        """The x axis's ticks for a plot ``width`` pixels wide over ranges ``r``: whole steps only (one evaluation
        spans step - 1 .. step + 1, whose 1-2-5 ticks would be halves)."""
        return nice_ticks(r[0], r[1], max(2, int(width / 90)), least_step=1.0)

    def _y_ticks(self, r, height: float) -> list[tuple[float, str]]:
        """The y axis's ticks (in plotted units) and their labels, for a plot ``height`` pixels tall."""
        return [(ty, format_value(10 ** ty if self.log_y else ty))
                for ty in nice_ticks(r[2], r[3], max(4, int(height / 25)))]

    def _draw_series(self, painter: QPainter, s: Series, r) -> None:
        points = self._points(s)
        if not points:
            return
        stride = max(1, len(points) // max(int(self._plot.width() * 2), 1))  # at most ~2 points per pixel
        shown = points[::stride] + ([points[-1]] if (len(points) - 1) % stride else [])
        path = QPainterPath(self._map(*shown[0], r))
        for x, y in shown[1:]:
            path.lineTo(self._map(x, y, r))
        painter.setPen(QPen(QColor(s.color), s.width))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(path)
        if s.markers:
            painter.setBrush(QColor(s.color))
            for x, y in shown:
                painter.drawEllipse(self._map(x, y, r), 3, 3)

    def _draw_legend(self, painter: QPainter, text: QColor, width: int) -> int:
        """The named series as short lines and names, right-aligned in the title's row; returns its left edge."""
        named = [s for s in self.series if s.name and s.xs]
        self.legend_rect = QRectF()
        if len(named) < 2:
            return width
        metrics = painter.fontMetrics()
        x = width - self.MARGIN_RIGHT
        y = (self.MARGIN_TOP - 2) / 2
        for s in reversed(named):
            x -= metrics.horizontalAdvance(s.name)
            painter.setPen(text)
            painter.drawText(QRectF(x, 0, metrics.horizontalAdvance(s.name) + 2, self.MARGIN_TOP - 2),
                             Qt.AlignmentFlag.AlignVCenter, s.name)
            painter.setPen(QPen(QColor(s.color), 2.5))
            painter.drawLine(QPointF(x - 18, y), QPointF(x - 4, y))
            x -= 28
        self.legend_rect = QRectF(x + 10, 0, width - self.MARGIN_RIGHT - x - 10, self.MARGIN_TOP - 2)
        return int(x)

    # -- hover -------------------------------------------------------------------------------------------------------

    def nearest(self, pos: QPointF) -> tuple[Series, float, float] | None:
        """The plotted point closest to ``pos`` (in widget coordinates), within 30 pixels."""
        r = self._ranges()
        if r is None or not self._plot.contains(pos):
            return None
        best, best_d = None, 30.0 ** 2
        for s in self.series:
            for x, y in self._points(s):
                q = self._map(x, y, r)
                d = (q.x() - pos.x()) ** 2 + (q.y() - pos.y()) ** 2
                if d < best_d:
                    best, best_d = (s, x, y), d
        return best

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        hit = self.nearest(event.position())
        if hit is None:
            QToolTip.hideText()
            return
        s, x, y = hit
        QToolTip.showText(event.globalPosition().toPoint(),
                          f"{s.name or self.y_label}: {format_value(y)}\n{self.x_label} {format_value(x)}", self)

    # -- export ------------------------------------------------------------------------------------------------------


class CurvesPanel(QWidget):
    """The four training plots in a grid: training loss (raw and smoothed), validation loss, BLEU, learning rate."""

    SMOOTHING = 0.95  # exponential moving average of the training loss

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("curvesPanel")
        self.loss_plot = CurvePlot("Training loss", "step", "loss (nats/token)")
        self.raw_loss = self.loss_plot.add_series(Series("per batch", "#9ecae1", 1.0))
        self.smooth_loss = self.loss_plot.add_series(Series("smoothed", "#2171b5", 2.2))
        self.val_plot = CurvePlot("Validation loss", "step", "loss (nats/token)")
        self.val_loss = self.val_plot.add_series(Series("validation", "#d94801", 2.0, markers=True))
        self.bleu_plot = CurvePlot("Validation BLEU", "step", BLEU_WORDS)  # plain words, not the metric's key
        self.bleu = self.bleu_plot.add_series(Series(BLEU_WORDS, "#238b45", 2.0, markers=True))
        self.lr_plot = CurvePlot("Learning rate", "step", "learning rate")
        self.lr = self.lr_plot.add_series(Series("lr", "#6a51a3", 1.8))
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        for i, plot in enumerate(self.plots()):
            grid.addWidget(plot, i // 2, i % 2)
        self._ema: float | None = None

    def plots(self) -> list[CurvePlot]:
        return [self.loss_plot, self.val_plot, self.bleu_plot, self.lr_plot]

    def clear(self, translation: bool = True) -> None:
        """Empty every plot for a new run; a language model (``translation`` False) has no BLEU to plot."""
        self._ema = None
        self.bleu_plot.empty_text = "No data yet" if translation else "A language model has no BLEU"
        for plot in self.plots():
            plot.clear()

    def add_steps(self, steps) -> None:
        """Append training steps (objects with step, loss, lr) and redraw once."""
        for s in steps:
            self._ema = s.loss if self._ema is None else self.SMOOTHING * self._ema + (1 - self.SMOOTHING) * s.loss
            self.raw_loss.add(s.step, s.loss)
            self.smooth_loss.add(s.step, self._ema)
            self.lr.add(s.step, s.lr)
        if steps:
            self.loss_plot.update()
            self.lr_plot.update()

    def add_evaluation(self, step: int, val_loss: float, bleu: float | None) -> None:
        self.val_loss.add(step, val_loss)
        if bleu is not None:  # None: a language model, which has no BLEU
            self.bleu.add(step, bleu)
        self.val_plot.update()
        self.bleu_plot.update()

    def on_run_changed(self, change: RunChange) -> None:
        """Follow the Train tab's run (``run_document``): a new run empties the plots, steps and evaluations add
        points."""
        match change:
            case RunCleared():
                self.clear(change.translation)
            case StepsAdded():
                self.add_steps(change.steps)
            case EvaluationAdded():
                record = change.result.record
                self.add_evaluation(record.step, record.loss, record.bleu)

    def set_log_y(self, on: bool) -> None:
        for plot in (self.loss_plot, self.val_plot, self.lr_plot):
            plot.set_log_y(on)

    def export(self, path: str | Path) -> None:
        """CSV: every series of every plot (plot, series, step, value); PNG/SVG: the four plots as shown."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".csv":
            with open(path, "w", newline="", encoding="utf-8") as f:
                writer = csv.writer(f)
                writer.writerow(["plot", "series", "step", "value"])
                for plot in self.plots():
                    for s in plot.series:
                        writer.writerows((plot.title, s.name, x, y) for x, y in zip(s.xs, s.ys))
            return
        if suffix == ".svg":
            from PySide6.QtSvg import QSvgGenerator

            svg = QSvgGenerator()
            svg.setFileName(str(path))
            svg.setSize(self.size())
            svg.setViewBox(self.rect())
            svg.setTitle("attnviz training curves")
            device: QPaintDevice = svg
        else:
            image = QImage(self.size() * 2, QImage.Format.Format_ARGB32)
            image.setDevicePixelRatio(2)
            image.fill(self.palette().color(QPalette.ColorRole.Window))
            device = image
        painter = QPainter(device)
        for plot in self.plots():
            painter.save()
            painter.translate(plot.geometry().topLeft())
            plot.paint(painter, plot.size())
            painter.restore()
        painter.end()
        if isinstance(device, QImage) and not device.save(str(path)):
            raise OSError(f"could not write {path}")

    def export_dialog(self, parent: QWidget) -> str | None:
        """Ask where to export the curves (PNG, SVG or CSV) and write them; the path written, or None."""
        path, chosen = QFileDialog.getSaveFileName(parent, "Export curves", "training-curves.png",
                                                   "PNG image (*.png);;SVG drawing (*.svg);;CSV data (*.csv)")
        if not path:
            return None
        if not Path(path).suffix:
            path += "." + chosen.split("*.")[-1].rstrip(")")
        try:
            self.export(path)
        except OSError as exc:
            QMessageBox.warning(parent, "Export failed", f"Could not save {path}: {exc}")
            return None
        return path
