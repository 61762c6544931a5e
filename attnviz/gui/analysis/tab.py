"""AnalysisTab: what the loaded model's heads do over a corpus, how well they align, one sentence's attention as
raw, norm-weighted or rolled-out maps, the BLEU each head is worth (``importance``), suspect translations (``suspect``).

A run (through the generic worker, with a progress bar and Cancel) computes the head statistics over the model's
val/test split or a text file and, with a gold alignment file, the AER of every cross-attention head. Its events
feed a Qt-free run document (``run_document``) that the views follow: the sortable table here and the Heads page
(``heads_page``: a layer x head map of the chosen statistic, AER among them; clicking a head lists its most typical
and most unusual sentences, which ``open_sentence`` hands to the Translate tab). The engine does the work; this tab
only asks and shows.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import QSortFilterProxyModel, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
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
from attnviz.engine.analysis.names import IMPORTANCE_SPLIT
from attnviz.gui.analysis.gold import GoldChoice
from attnviz.gui.analysis.heads_page import HeadsPage
from attnviz.gui.analysis.importance import ImportancePanel
from attnviz.gui.analysis.llm_notes import with_kv_column
from attnviz.gui.analysis.suspect import SuspectPanel
from attnviz.gui.analysis.widgets import SentenceViews, StatsTableModel, run_partner
from attnviz.gui.data_folder import DataFolder, missing_data_hint
from attnviz.gui.widgets import add_labelled, copyable, named, show_file
from attnviz.gui.worker import JobFailure, Worker
from attnviz.session.analysis.run_document import (
    AnalysisChange,
    AnalysisRunDocument,
    Progressed,
    RunFailed,
    RunReset,
    StatsArrived,
)

COMPARE_TIP = ("A second checkpoint with the same vocabularies (e.g. an earlier epoch of the run): its statistics on "
               "the same corpus, and the map of the difference")


class AnalysisTab(QWidget):
    status = Signal(str)
    open_sentence = Signal(str)  # a corpus sentence to translate in the Translate tab

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.translator = None
        self.run_document = AnalysisRunDocument()  # the last head-statistics run; the views follow it
        self.files: tuple[str | None, str | None] = (None, None)  # source, target text files
        self.compare: str | None = None  # a second checkpoint (same vocabularies)
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
        self.heads_page = HeadsPage(self.run_document)
        page = self.heads_page  # its widgets keep their names on the tab
        self.stat_combo, self.kind_combo, self.diff_check = page.stat_combo, page.kind_combo, page.diff_check
        self.head_map, self.thresholds, self.head_title = page.head_map, page.thresholds, page.head_title
        self.sentence_list, self.open_button = page.sentence_list, page.open_button
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
        self.pages = QTabWidget()
        for page, title in ((self.heads_page, "Heads"), (self.sentence_views, "Current sentence"),
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
        self.worker.produced.connect(self._on_worker_produced)
        self.worker.failed.connect(self._on_worker_failed)
        self.worker.finished.connect(self._on_worker_finished)
        self.view_worker.produced.connect(self._on_views_produced)
        self.view_worker.failed.connect(self._on_views_failed)
        self.table.selectionModel().currentRowChanged.connect(self._on_table_row_changed)
        for panel in (self.heads_page, self.importance, self.suspect):
            panel.status.connect(self.status)
        for panel in (self.heads_page, self.suspect):
            panel.open_sentence.connect(self.open_sentence)
        self.run_document.subscribe(self._on_run_changed)

    # -- inputs ------------------------------------------------------------------------------------------------------

    def set_translator(self, translator) -> None:
        self.worker.cancel()
        self.translator = translator
        self.run_document.reset()
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
        self.run_document.reset(running=True)
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

    @property
    def stats(self):
        """The loaded model's statistics from the last run (None before one)."""
        return self.run_document.stats

    @property
    def stats_b(self):
        return self.run_document.stats_b

    @property
    def alignment(self):
        return self.run_document.alignment

    @property
    def failed(self) -> bool:
        """The last run ended with a message: it is not "done", and shows nothing stale."""
        return self.run_document.failed

    @Slot(object)
    def _on_worker_produced(self, event) -> None:
        self.run_document.feed(event)

    @Slot(object)
    def _on_worker_failed(self, failure: JobFailure) -> None:
        first_line = failure.text.splitlines()[0] + missing_data_hint(failure)
        self.run_document.fail(first_line)
        self.status.emit(first_line)

    def _on_run_changed(self, change: AnalysisChange) -> None:
        """The tab's own views follow the run: the table and the progress bar (the Heads page follows it too)."""
        match change:
            case RunReset(running=False):
                self.table_model.set_rows([])
            case Progressed():
                self.progress.setMaximum(change.total)
                self.progress.setValue(change.done)
                self.progress.setFormat(f"{change.phase}: %v / %m sentences")
            case StatsArrived(compare=False):
                stats = self.run_document.stats
                assert stats is not None
                self.table_model.set_rows(with_kv_column(stats.table(), stats.notes))
                self.table_model.size_columns(self.table)
            case RunFailed():
                self.progress.setRange(0, 1)  # stopped: no busy bar, no stale count
                self.progress.reset()

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

    @Slot(object, object)
    def _on_table_row_changed(self, current, previous) -> None:
        if current.isValid():
            source = self.table_proxy.mapToSource(current)
            row = self.table_model.row(source.row())
            self.show_head(row["kind"], row["layer"], row["head"])

    def show_head(self, kind: str, layer: int, head: int) -> None:
        """List the head's most typical and most unusual sentences (on the Heads page)."""
        self.heads_page.show_head(kind, layer, head)
