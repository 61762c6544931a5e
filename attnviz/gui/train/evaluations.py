"""The Train tab's evaluations: a table of every evaluation (epoch, step, validation loss, PPL, accuracy, BLEU,
time) and, for the selected row, the sample translations the model produced then.

Split from the Train tab so that the tab only drives the run; it follows the tab's run document
(``on_run_changed``), each evaluation a row through ``add_row``.
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

from attnviz.engine.events import Sample
from attnviz.engine.records import EvalRecord
from attnviz.gui.widgets import copyable, named
from attnviz.session.train.run_document import EvaluationAdded, RunChange, RunCleared

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
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)  # rows to copy
        copyable(self.table)
        self.samples_view = QTextBrowser()
        self.samples_view.setObjectName("samplesView")
        self.samples_view.setPlaceholderText("Select an evaluation to see its sample translations")
        self.addWidget(self.table)
        self.addWidget(self.samples_view)
        self.samples: list[tuple[Sample, ...]] = []
        self.table.itemSelectionChanged.connect(self._on_table_selection_changed)

    def clear(self) -> None:
        self.samples = []
        self.table.setRowCount(0)
        self.samples_view.clear()

    def on_run_changed(self, change: RunChange) -> None:
        match change:
            case RunCleared():
                self.clear()
            case EvaluationAdded():
                self.add_row(change.result.record, change.result.samples)

    def add_row(self, record: EvalRecord, samples: tuple[Sample, ...]) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        bleu = record.bleu
        values = (str(record.epoch), f"{record.step:,}", f"{record.loss:.4f}", f"{record.ppl:.2f}",
                  f"{record.accuracy:.4f}", "\u2014" if bleu is None else f"{bleu:.2f}",  # a language model has none
                  f"{record.seconds:.0f}")
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
        if all(s.source is None for s in samples):  # a language model's samples
            items = "".join(f"<li><b>{escape(s.output)}</b></li>" for s in samples)
            self.samples_view.setHtml(f"<p>Sampled at temperature 1 at this evaluation:</p><ul>{items}</ul>")
            return
        cells = "".join(f"<tr><td>{escape(s.source or '')}</td><td>{escape(s.reference or '')}</td>"
                        f"<td><b>{escape(s.output)}</b></td></tr>" for s in samples)
        self.samples_view.setHtml("<table cellpadding='4'><tr><th align='left'>Source</th><th align='left'>Reference"
                                  f"</th><th align='left'>Model then</th></tr>{cells}</table>")
