"""The Analysis tab's Heads page: a layer x head map of the chosen statistic (AER among them, or a compared
checkpoint's difference B - A), the tags' thresholds, and the most typical and most unusual sentences of the head
clicked, which "Open in Translate" hands on. It follows the tab's run document (``on_run_changed``) and reads the
results from it.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from attnviz.engine.analysis.names import STATS, note_lines
from attnviz.gui.analysis.llm_notes import group_size
from attnviz.gui.analysis.widgets import AER, HeadMap, thresholds_text
from attnviz.gui.widgets import add_labelled, copyable, named
from attnviz.session.analysis.run_document import (
    AlignmentArrived,
    AnalysisChange,
    AnalysisRunDocument,
    RunFailed,
    RunReset,
    StatsArrived,
)


def short_notes(notes: dict) -> str:
    """An LLM's notes (``llm_heads``) in one line under the thresholds; the label's tooltip has them in full."""
    if not notes:
        return ""
    parts = ["<b>LLM</b>: rows over the whole prompt"]
    if notes.get("windowed_layers"):
        parts.append(f"windowed layers {', '.join(map(str, notes['windowed_layers']))}")
    if notes.get("kv_groups"):
        parts.append("kv groups " + ", ".join(f"{g[0]}-{g[-1]}" for g in notes["kv_groups"]))
    return "<br>" + "; ".join(parts) + " (hover: details)"


class HeadsPage(QWidget):
    open_sentence = Signal(str)  # a corpus sentence to translate in the Translate tab
    status = Signal(str)

    def __init__(self, run: AnalysisRunDocument, parent: QWidget | None = None):
        super().__init__(parent)
        self.run = run
        self.stat_combo = named(QComboBox(), "statCombo", "Statistic shown per layer and head")
        self.kind_combo = named(QComboBox(), "statKindCombo", "Attention kind")
        self.diff_check = named(QCheckBox("Show &B - A"), "diffCheck", "Show the difference",
                                "Map the compared checkpoint's statistic minus the loaded model's")
        self.diff_check.setEnabled(False)
        self.head_map = HeadMap()
        self.thresholds = named(QLabel(thresholds_text()), "thresholdsLabel", "Tag thresholds")
        self.thresholds.setWordWrap(True)
        self.head_title = QLabel("<b>Sentences of a head</b> (click one in the table or the map)")
        self.head_title.setWordWrap(True)  # it also says why an analysis failed: a long message wraps, never widens
        self.sentence_list = copyable(named(QListWidget(), "headSentences", "Typical and unusual sentences of a head"))
        self.open_button = named(QPushButton("Open in Tr&anslate"), "openSentenceButton",
                                 "Open the selected sentence in the Translate tab")
        self._lay_out()
        self.diff_check.toggled.connect(self._on_map_choice_changed)
        self.stat_combo.currentIndexChanged.connect(self._on_map_choice_changed)
        self.kind_combo.currentIndexChanged.connect(self._on_map_choice_changed)
        self.head_map.clicked.connect(self._on_head_map_clicked)
        self.open_button.clicked.connect(self._on_open_clicked)
        self.sentence_list.itemDoubleClicked.connect(self._on_open_clicked)  # the item double-clicked is current
        run.subscribe(self.on_run_changed)

    def _lay_out(self) -> None:
        layout = QVBoxLayout(self)
        chooser = QHBoxLayout()
        add_labelled(chooser, (("&Statistic:", self.stat_combo), ("&Kind:", self.kind_combo)), stretch=1)
        chooser.addWidget(self.diff_check)
        layout.addLayout(chooser)
        for shown, stretch in ((self.head_map, 3), (self.head_map.note, 0), (self.thresholds, 0)):
            layout.addWidget(shown, stretch)
        layout.addWidget(self.head_title)
        self.sentence_list.setMinimumHeight(40)  # at 1024x700 it yields room to the map before the map overlaps
        layout.addWidget(self.sentence_list, 2)
        layout.addWidget(self.open_button, 0, Qt.AlignmentFlag.AlignRight)

    def on_run_changed(self, change: AnalysisChange) -> None:
        match change:
            case RunReset():
                self.diff_check.setChecked(False)
                self.diff_check.setEnabled(False)
                if not change.running:
                    self.head_map.set_data(None)
                    self.sentence_list.clear()
            case StatsArrived(compare=True):
                self.diff_check.setEnabled(True)
                self.diff_check.setChecked(True)
            case StatsArrived():
                self._fill_choices()
            case AlignmentArrived():
                self._show_alignment()
            case RunFailed():
                self.diff_check.setChecked(False)
                self.diff_check.setEnabled(False)
                self.head_title.setText(f"<b>The analysis failed:</b> {escape(change.message)}")

    def _fill_choices(self) -> None:
        stats = self.run.stats
        assert stats is not None
        self.thresholds.setText(thresholds_text() + short_notes(stats.notes))
        self.thresholds.setToolTip("\n".join(note_lines(stats.notes)))  # an LLM's, in full: llm_heads
        self.head_map.kv_group = group_size(stats.notes)  # lines part grouped-query attention's groups
        for combo, items in ((self.stat_combo, (*STATS, "alignment_proxy")), (self.kind_combo, stats.kinds)):
            combo.blockSignals(True)
            combo.clear()
            for item in items:
                combo.addItem(item.replace("_", " "), item)
            combo.blockSignals(False)
        self._on_map_choice_changed()

    def _show_alignment(self) -> None:
        result = self.run.alignment
        best = result.best_head() if result is not None else None
        if result is None or best is None:  # alignments without gold links: nothing to score per head
            self.status.emit("Alignments computed; without gold links there is no AER per head to map.")
            return
        self.stat_combo.addItem("AER (gold alignments)", AER)
        self.stat_combo.setCurrentIndex(self.stat_combo.count() - 1)
        self.kind_combo.setCurrentIndex(max(0, self.kind_combo.findData("cross")))
        layer, head, value = best
        self.status.emit(f"Best aligning head: layer {layer + 1}, head {head + 1} (AER {value:.3f}; all heads "
                         f"averaged {result.aer_average:.3f}; diagonal {result.scores['diagonal']['aer']:.3f})")

    @Slot()
    def _on_map_choice_changed(self) -> None:
        run, stat, kind = self.run, self.stat_combo.currentData(), self.kind_combo.currentData()
        if run.stats is not None and stat is not None and kind is not None:
            self.head_map.show_statistic(run.stats, stat, kind, run.alignment,
                                         run.stats_b if self.diff_check.isChecked() else None)

    @Slot(int, int)
    def _on_head_map_clicked(self, layer: int, head: int) -> None:
        self.show_head(self.kind_combo.currentData(), layer, head)

    def show_head(self, kind: str, layer: int, head: int) -> None:
        """List the head's most typical and most unusual sentences."""
        stats = self.run.stats
        if stats is None or kind not in stats.kinds:
            return
        typical, unusual = stats.typical(kind, layer, head)
        self.head_title.setText(f"<b>{kind}, layer {layer + 1}, head {head + 1}</b>: most typical, then most "
                                "unusual sentences (double-click one to translate it)")
        self.sentence_list.clear()
        for title, indices in (("typical", typical), ("unusual", unusual)):
            for i in indices:
                item = QListWidgetItem(f"[{title}] {stats.sentences[i]}")
                item.setData(Qt.ItemDataRole.UserRole, stats.sentences[i])
                self.sentence_list.addItem(item)
        if self.sentence_list.count():
            self.sentence_list.setCurrentRow(0)

    @Slot()
    def _on_open_clicked(self) -> None:
        item = self.sentence_list.currentItem()
        if item is not None:
            self.open_sentence.emit(item.data(Qt.ItemDataRole.UserRole))
