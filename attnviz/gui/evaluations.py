"""The Train tab's evaluations: a table of every evaluation (epoch, step, validation loss, PPL, accuracy, BLEU,
time) and, for the selected row, the sample translations the model produced then.

Split from the Train tab so that the tab only drives the run; rows come through ``add_row``.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QWidget,
)

from attnviz.gui.widgets import named

EVAL_COLUMNS = ("Epoch", "Step", "Val loss", "PPL", "Accuracy", "BLEU", "Time (s)")


class EvaluationsPanel(QSplitter):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(Qt.Orientation.Vertical, parent)
        self.table = named(QTableWidget(0, len(EVAL_COLUMNS)), "evalTable", "Evaluations")
        self.table.setHorizontalHeaderLabels(EVAL_COLUMNS)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.samples_view = QTextBrowser()
        self.samples_view.setObjectName("samplesView")
        self.samples_view.setPlaceholderText("Select an evaluation to see its sample translations")
        self.addWidget(self.table)
        self.addWidget(self.samples_view)
        self.samples: list[tuple[tuple[str, str, str], ...]] = []
        self.table.itemSelectionChanged.connect(self._on_table_selection_changed)

    def clear(self) -> None:
        self.samples = []
        self.table.setRowCount(0)
        self.samples_view.clear()

    def add_row(self, epoch, step, loss, ppl, accuracy, bleu, seconds, samples) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        values = (str(epoch), f"{step:,}", f"{loss:.4f}", f"{ppl:.2f}", f"{accuracy:.4f}",
                  "\u2014" if bleu is None else f"{bleu:.2f}", f"{seconds:.0f}")  # a language model has no BLEU
        for col, text in enumerate(values):
            item = QTableWidgetItem(text)
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.table.setItem(row, col, item)
        self.samples.append(tuple(samples))
        self.table.scrollToBottom()

    @Slot()
    def _on_table_selection_changed(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return
        samples = self.samples[rows[0].row()]
        if not samples:
            self.samples_view.setPlainText("No samples were kept for this evaluation (it happened before resuming).")
            return
        if all(not src and not ref for src, ref, _ in samples):  # a language model's samples
            items = "".join(f"<li><b>{escape(h)}</b></li>" for _, _, h in samples)
            self.samples_view.setHtml(f"<p>Sampled at temperature 1 at this evaluation:</p><ul>{items}</ul>")
            return
        cells = "".join(f"<tr><td>{escape(s)}</td><td>{escape(r)}</td><td><b>{escape(h)}</b></td></tr>"
                        for s, r, h in samples)
        self.samples_view.setHtml("<table cellpadding='4'><tr><th align='left'>Source</th><th align='left'>Reference"
                                  f"</th><th align='left'>Model then</th></tr>{cells}</table>")
