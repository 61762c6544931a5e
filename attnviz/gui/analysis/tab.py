"""AnalysisTab: what the loaded model's heads do over a corpus, how well they align, one sentence's attention as
raw, norm-weighted or rolled-out maps, the BLEU each head is worth (``importance``), suspect translations (``suspect``).

A run (through the generic worker, with a progress bar and Cancel) computes the head statistics over the model's
val/test split or a text file and, with a gold alignment file, the AER of every cross-attention head. The results
show as a sortable table and as a layer x head map of the chosen statistic (AER among them); clicking a head lists
its most typical and most unusual sentences, which ``open_sentence`` hands to the Translate tab. The thresholds of
the tags are stated in the view. The engine does the work; this tab only asks and shows.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from PySide6.QtCore import QSortFilterProxyModel, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from attnviz.engine.analysis.jobs import analysis_job, views_job
from attnviz.engine.analysis.names import IMPORTANCE_SPLIT, STATS
from attnviz.gui.analysis.gold import GoldChoice
from attnviz.gui.analysis.importance import ImportancePanel
from attnviz.gui.analysis.suspect import SuspectPanel
from attnviz.gui.analysis.widgets import AER, HeadMap, SentenceViews, StatsTableModel, run_partner, thresholds_text
from attnviz.gui.data_folder import DataFolder, missing_data_hint
from attnviz.gui.widgets import add_labelled, copyable, named, show_file
from attnviz.gui.worker import JobFailure, Worker

if TYPE_CHECKING:
    from attnviz.engine.analysis.stats import HeadStats

COMPARE_TIP = ("A second checkpoint with the same vocabularies (e.g. an earlier epoch of the run): its statistics on "
               "the same corpus, and the map of the difference")


class AnalysisTab(QWidget):
    status = Signal(str)
    open_sentence = Signal(str)  # a corpus sentence to translate in the Translate tab

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.translator = None
        self.stats = None
        self.alignment = None
        self.files: tuple[str | None, str | None] = (None, None)  # source, target text files
        self.compare: str | None = None  # a second checkpoint (same vocabularies)
        self.stats_b: HeadStats | None = None  # the compared checkpoint's
        self.failed = False  # the last run ended with a message: it is not "done", and shows nothing stale
        self.data_folder: DataFolder | None = None  # the app's data folder (the corpus splits are read there)
        self.worker = Worker(self)
        self.view_worker = Worker(self)
        self.table_model = StatsTableModel(self)
        self._build()
        self._connect()
        self.set_translator(None)

    def _build(self) -> None:
        self.corpus_combo = named(QComboBox(), "corpusCombo", "Corpus", "The model's validation or test split, "
                                  "or your own text files (one sentence per line)")
        self.corpus_combo.addItem("Validation split", "val")
        self.corpus_combo.addItem("Test split", "test")
        self.corpus_combo.addItem("Text files...", "files")
        self.corpus_combo.addItem("Alignment set (source ||| target)...", "pairs")
        self.corpus_combo.setCurrentIndex(self.corpus_combo.findData(IMPORTANCE_SPLIT))  # as the CLI's default
        self.limit_spin = named(QSpinBox(), "limitSpin", "Sentences", "Use only the first N sentences (0 = all)")
        self.limit_spin.setRange(0, 1_000_000)
        self.limit_spin.setSpecialValueText("all")
        self.targets_combo = named(QComboBox(), "targetsCombo", "Decoder input",
                                   "What the decoder is fed: the references, or the model's own greedy outputs")
        self.targets_combo.addItem("references", "reference")
        self.targets_combo.addItem("own greedy outputs", "greedy")
        self.gold = GoldChoice()
        self.gold_button = self.gold.button
        self.compare_button = named(QPushButton("Compare &with..."), "compareButton", "Compare with a checkpoint",
                                    COMPARE_TIP)
        self.diff_check = named(QCheckBox("Show &B - A"), "diffCheck", "Show the difference",
                                "Map the compared checkpoint's statistic minus the loaded model's")
        self.diff_check.setEnabled(False)
        self.run_button = named(QPushButton("R&un analysis"), "runAnalysisButton", "Run analysis")
        self.cancel_button = named(QPushButton("&Cancel"), "cancelAnalysisButton", "Cancel the analysis")
        self.progress = named(QProgressBar(), "analysisProgress", "Analysis progress")
        self.progress.setFormat("%v / %m sentences")
        self.table = named(QTableView(), "statsTable", "Head statistics", "Every head's statistics; click a "
                           "column title to sort, a row to see the head's sentences")
        self.table_proxy = QSortFilterProxyModel(self)  # sorts the table's rows; the model keeps their order
        self.table_proxy.setSourceModel(self.table_model)
        self.table_proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.table.setModel(self.table_proxy)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        copyable(self.table).setSelectionMode(QTableView.SelectionMode.ExtendedSelection)  # Ctrl+A: rows to copy
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.stat_combo = named(QComboBox(), "statCombo", "Statistic shown per layer and head")
        self.kind_combo = named(QComboBox(), "statKindCombo", "Attention kind")
        self.head_map = HeadMap()
        self.thresholds = named(QLabel(thresholds_text()), "thresholdsLabel", "Tag thresholds")
        self.thresholds.setWordWrap(True)
        self.head_title = QLabel("<b>Sentences of a head</b> (click one in the table or the map)")
        self.head_title.setWordWrap(True)  # it also says why an analysis failed: a long message wraps, never widens
        self.sentence_list = copyable(named(QListWidget(), "headSentences", "Typical and unusual sentences of a head"))
        self.open_button = named(QPushButton("Open in Tr&anslate"), "openSentenceButton",
                                 "Open the selected sentence in the Translate tab")
        self.sentence_views = SentenceViews()
        self.data_button = named(QPushButton("Data fo&lder..."), "analysisDataButton", "Data folder",
                                 "The folder with the corpora, shared with the Train tab")
        self.importance = ImportancePanel(self.corpus_choice, self.data_dir)
        self.suspect = SuspectPanel(self.corpus_choice, self.data_dir)
        self._layout()

    def _layout(self) -> None:
        top = QHBoxLayout()
        add_labelled(top, (("C&orpus:", self.corpus_combo), ("Si&ze (sentences):", self.limit_spin),
                           ("Deco&der input:", self.targets_combo)))
        top.addWidget(self.data_button)
        top.addStretch(1)
        files = QHBoxLayout()  # the chosen files on a row of their own: beside other controls they widened the window
        for chosen in (self.gold, self.compare_button):
            files.addWidget(chosen)
        files.addStretch(1)
        running = QHBoxLayout()
        for control, stretch in ((self.run_button, 0), (self.cancel_button, 0), (self.progress, 1)):
            running.addWidget(control, stretch)
        map_page = QWidget()
        map_layout = QVBoxLayout(map_page)
        chooser = QHBoxLayout()
        add_labelled(chooser, (("&Statistic:", self.stat_combo), ("&Kind:", self.kind_combo)), stretch=1)
        chooser.addWidget(self.diff_check)
        map_layout.addLayout(chooser)
        for shown, stretch in ((self.head_map, 3), (self.head_map.note, 0), (self.thresholds, 0)):
            map_layout.addWidget(shown, stretch)
        map_layout.addWidget(self.head_title)
        map_layout.addWidget(self.sentence_list, 2)
        map_layout.addWidget(self.open_button, 0, Qt.AlignmentFlag.AlignRight)
        self.pages = QTabWidget()
        for page, title in ((map_page, "Heads"), (self.sentence_views, "Current sentence"),
                            (self.importance, "Head importance"), (self.suspect, "Suspect translations")):
            self.pages.addTab(page, title)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        for index, (widget, stretch) in enumerate(((self.table, 3), (self.pages, 2))):
            splitter.addWidget(widget)
            splitter.setStretchFactor(index, stretch)
        layout = QVBoxLayout(self)
        for row in (top, files, running):
            layout.addLayout(row)
        layout.addWidget(splitter, 1)

    def _connect(self) -> None:
        self.run_button.clicked.connect(self.run)
        self.cancel_button.clicked.connect(self.cancel)
        self.corpus_combo.activated.connect(self._on_corpus_activated)
        self.compare_button.clicked.connect(self._on_compare_clicked)
        self.data_button.clicked.connect(self._on_data_clicked)
        self.diff_check.toggled.connect(self._on_map_choice_changed)
        self.worker.produced.connect(self._on_worker_produced)
        self.worker.failed.connect(self._on_worker_failed)
        self.worker.finished.connect(self._on_worker_finished)
        self.view_worker.produced.connect(self._on_views_produced)
        self.view_worker.failed.connect(self._on_views_failed)
        self.stat_combo.currentIndexChanged.connect(self._on_map_choice_changed)
        self.kind_combo.currentIndexChanged.connect(self._on_map_choice_changed)
        self.head_map.clicked.connect(self._on_head_map_clicked)
        self.table.selectionModel().currentRowChanged.connect(self._on_table_row_changed)
        self.open_button.clicked.connect(self._on_open_clicked)
        self.sentence_list.itemDoubleClicked.connect(self._on_open_clicked)  # the item double-clicked is current
        for panel in (self.importance, self.suspect):
            panel.status.connect(self.status)
        self.suspect.open_sentence.connect(self.open_sentence)

    # -- inputs ------------------------------------------------------------------------------------------------------

    def set_translator(self, translator) -> None:
        self.worker.cancel()
        self.translator, self.stats, self.alignment = translator, None, None
        self.table_model.set_rows([])
        self.head_map.set_data(None)
        self.sentence_list.clear()
        self.sentence_views.set_views({}, {})
        self._set_running(False)
        self.run_button.setEnabled(translator is not None)
        for panel in (self.importance, self.suspect):
            panel.set_translator(translator)

    def set_translation(self, translation) -> None:
        """The Translate tab's current sentence, shown under each view (computed in the background)."""
        if self.translator is not None and translation is not None:
            translator, compare = self.translator, self.compare
            self.view_worker.start(lambda stop: views_job(translator, translation, compare))

    def set_data_folder(self, folder: DataFolder) -> None:
        self.data_folder = folder
        folder.show_on(self.data_button)

    def data_dir(self) -> str | None:
        return self.data_folder.path() if self.data_folder is not None else None

    @Slot()
    def _on_data_clicked(self) -> None:
        if self.data_folder is not None:
            self.data_folder.choose(self)

    def corpus_choice(self) -> tuple[str | None, str | None, str | None]:
        """(split, None, None), (None, source file, reference file) for text files, ("pairs", file, None) for a
        set of 'source ||| target' lines."""
        split = self.corpus_combo.currentData()
        return (None, *self.files) if split == "files" else ("pairs", self.files[0], None) if split == "pairs" \
            else (split, None, None)

    def run(self) -> None:
        if self.translator is None:
            return
        split, corpus = self.corpus_combo.currentData(), self.corpus_choice()
        if split in ("files", "pairs") and not self.files[0]:
            self.status.emit("Choose a source file first (Corpus: Text files...)")
            return
        translator, limit, targets = self.translator, self.limit_spin.value(), self.targets_combo.currentData()
        gold, compare, data = self.gold.options(), self.compare, self.data_dir()
        if targets == "reference" and split == "files" and not self.files[1]:
            targets = "greedy"  # a source file alone has no references
        self.stats, self.alignment, self.stats_b, self.failed = None, None, None, False
        self.diff_check.setChecked(False)
        self.diff_check.setEnabled(False)
        self.progress.setRange(0, limit)  # the size asked (0, all: a busy bar until the corpus is read)
        self.progress.setValue(0)
        self._set_running(True)
        self.worker.start(lambda stop: analysis_job(translator, corpus, limit, targets, gold, compare, stop, data))

    @Slot()
    def cancel(self) -> None:
        self.worker.cancel()
        self._set_running(False)
        self.status.emit("Analysis cancelled")

    def is_running(self) -> bool:
        return self.worker.is_running()

    def _set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running and self.translator is not None)
        self.cancel_button.setEnabled(running)
        for widget in (self.corpus_combo, self.limit_spin, self.targets_combo, self.gold, self.compare_button):
            widget.setEnabled(not running)

    @Slot(int)
    def _on_corpus_activated(self, index: int) -> None:
        kind = self.corpus_combo.itemData(index)
        if kind not in ("files", "pairs"):
            return
        src, _ = QFileDialog.getOpenFileName(self, "Source sentences (one per line)" if kind == "files" else
                                             "Sentence pairs ('source ||| target' per line)")
        if src and kind == "pairs":
            self.set_files(src, None, "pairs")
            return
        if not src:
            self.corpus_combo.setCurrentIndex(0)
            return
        tgt, _ = QFileDialog.getOpenFileName(self, "References aligned with the source (Cancel for none)")
        self.set_files(src, tgt or None)

    def set_files(self, src: str, tgt: str | None, kind: str = "files") -> None:
        self.files = (src, tgt)
        self.corpus_combo.setCurrentIndex(self.corpus_combo.findData(kind))
        title = "Text files: " if kind == "files" else "Alignment set: "
        self.corpus_combo.setItemText(self.corpus_combo.currentIndex(), title + src.rsplit("/", 1)[-1])

    @Slot()
    def _on_compare_clicked(self) -> None:
        start = run_partner(self.translator.metadata.get("path") if self.translator is not None else None)
        path, _ = QFileDialog.getOpenFileName(self, "Checkpoint to compare with", start,
                                              "attnviz checkpoints (*.safetensors);;All files (*)")
        self.set_compare(path or None)

    def set_compare(self, path: str | None) -> None:
        self.compare = path
        show_file(self.compare_button, "Compare &with: ", path, "Compare &with...", COMPARE_TIP)

    # -- results -----------------------------------------------------------------------------------------------------

    @Slot(object)
    def _on_worker_produced(self, event) -> None:
        from attnviz.engine.analysis.alignment import AlignmentReady
        from attnviz.engine.analysis.run import AnalysisProgress, HeadStatsReady

        if isinstance(event, AnalysisProgress):
            self.progress.setMaximum(event.total)
            self.progress.setValue(event.done)
            self.progress.setFormat(f"{event.phase}: %v / %m sentences")
        elif isinstance(event, HeadStatsReady) and event.role == "compare":
            self.stats_b = event.stats
            self.diff_check.setEnabled(True)
            self.diff_check.setChecked(True)
        elif isinstance(event, HeadStatsReady):
            self.set_stats(event.stats)
        elif isinstance(event, AlignmentReady):
            self.set_alignment(event)

    @Slot(object)
    def _on_worker_failed(self, failure: JobFailure) -> None:
        first_line = failure.text.splitlines()[0] + missing_data_hint(failure)
        self.failed, self.stats_b = True, None
        self.progress.setRange(0, 1)  # stopped: no busy bar, no stale count
        self.progress.reset()
        self.diff_check.setChecked(False)
        self.diff_check.setEnabled(False)
        self.status.emit(first_line)
        self.head_title.setText(f"<b>The analysis failed:</b> {escape(first_line)}")

    @Slot(object)
    def _on_views_failed(self, failure: JobFailure) -> None:
        first_line = failure.text.splitlines()[0]
        self.sentence_views.set_views({}, {})
        self.sentence_views.quantity.setText(f"<b>The views failed:</b> {escape(first_line)}")
        self.status.emit(first_line)

    @Slot()
    def _on_worker_finished(self) -> None:
        self._set_running(False)
        if self.stats is not None and not self.failed:
            self.status.emit(f"Analysis done: {len(self.stats.sentences)} sentences")

    @Slot(object)
    def _on_views_produced(self, item) -> None:
        self.sentence_views.set_views(*item)

    def set_stats(self, stats) -> None:
        self.stats = stats
        self.table_model.set_rows(stats.table())
        self.table_model.size_columns(self.table)
        for combo, items in ((self.stat_combo, (*STATS, "alignment_proxy")), (self.kind_combo, stats.kinds)):
            combo.blockSignals(True)
            combo.clear()
            for item in items:
                combo.addItem(item.replace("_", " "), item)
            combo.blockSignals(False)
        self._on_map_choice_changed()

    def set_alignment(self, result) -> None:
        self.alignment = result
        self.stat_combo.addItem("AER (gold alignments)", AER)
        self.stat_combo.setCurrentIndex(self.stat_combo.count() - 1)
        self.kind_combo.setCurrentIndex(max(0, self.kind_combo.findData("cross")))
        layer, head, value = result.best_head()
        self.status.emit(f"Best aligning head: layer {layer + 1}, head {head + 1} (AER {value:.3f}; all heads "
                         f"averaged {result.aer_average:.3f}; diagonal {result.scores['diagonal']['aer']:.3f})")

    @Slot()
    def _on_map_choice_changed(self) -> None:
        stat, kind = self.stat_combo.currentData(), self.kind_combo.currentData()
        if self.stats is not None and stat is not None and kind is not None:
            self.head_map.show_statistic(self.stats, stat, kind, self.alignment,
                                         self.stats_b if self.diff_check.isChecked() else None)

    @Slot(int, int)
    def _on_head_map_clicked(self, layer: int, head: int) -> None:
        self.show_head(self.kind_combo.currentData(), layer, head)

    @Slot(object, object)
    def _on_table_row_changed(self, current, previous) -> None:
        if current.isValid():
            source = self.table_proxy.mapToSource(current)
            row = self.table_model.row(source.row())
            self.show_head(row["kind"], row["layer"], row["head"])

    def show_head(self, kind: str, layer: int, head: int) -> None:
        """List the head's most typical and most unusual sentences."""
        if self.stats is None or kind not in self.stats.kinds:
            return
        typical, unusual = self.stats.typical(kind, layer, head)
        self.head_title.setText(f"<b>{kind}, layer {layer + 1}, head {head + 1}</b>: most typical, then most "
                                "unusual sentences (double-click one to translate it)")
        self.sentence_list.clear()
        for title, indices in (("typical", typical), ("unusual", unusual)):
            for i in indices:
                item = QListWidgetItem(f"[{title}] {self.stats.sentences[i]}")
                item.setData(Qt.ItemDataRole.UserRole, self.stats.sentences[i])
                self.sentence_list.addItem(item)
        if self.sentence_list.count():
            self.sentence_list.setCurrentRow(0)

    @Slot()
    def _on_open_clicked(self) -> None:
        item = self.sentence_list.currentItem()
        if item is not None:
            self.open_sentence.emit(item.data(Qt.ItemDataRole.UserRole))
