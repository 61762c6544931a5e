"""MainWindow: assembles the tabs, the model picker, menus, status bar, drag and drop and remembered settings.

Models load in the background through the generic worker; a bad file shows the engine's message in a dialog and
the window keeps the model it had.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from PySide6.QtCore import QRect, QSettings, QSize, Qt, Slot
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QComboBox, QFileDialog, QLabel, QMainWindow, QMessageBox, QTabWidget, QToolBar

from attnviz._version import __version__
from attnviz.engine.hub import file_formats, folder_formats
from attnviz.gui import accessible
from attnviz.gui.analysis.tab import AnalysisTab
from attnviz.gui.data_folder import DataFolder
from attnviz.gui.export_files import ViewExports
from attnviz.gui.precision import add_precision_menu, load_job, precision
from attnviz.gui.prompt_menu import add_prompt_action, apply_prompt, reads_prompt
from attnviz.gui.shortcuts import ShortcutsDialog
from attnviz.gui.status_bar import ElidingStatusBar
from attnviz.gui.train.tab import TrainTab
from attnviz.gui.translate.tab import TranslateTab
from attnviz.gui.widgets import copyable, stored
from attnviz.gui.worker import JobFailure, Worker, live_workers, wait_all
from attnviz.session.model_list import (
    bundled_models,
    describe,
    model_file_filter,
    model_summary,
    named_entries,
    picker_label,
    shown_name,
)

OPEN_OTHER = "__open__"
MAX_RECENT = 8
NO_USER_PLATFORMS = frozenset({"offscreen", "minimal"})  # no screen, so nobody to answer a question
CLOSE_WAIT_MS = 700  # closing ends within 2 s whatever a job does (issue 30), with margin on a busy machine


def first_size(available: QRect) -> QSize:
    """The first window's size on a screen with ``available`` room: most of it, as a map-centred tool wants."""
    return QSize(min(available.width(), max(int(0.9 * available.width()), 1024)),
                 min(available.height(), max(int(0.9 * available.height()), 700)))


def fit_to_screen(window: QMainWindow) -> None:
    """Shrink ``window`` to its screen's available area and move it inside (frame excluded: Qt adds it later)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    available = screen.availableGeometry()
    size = window.size().boundedTo(available.size())
    if size != window.size():
        window.resize(size)
    x = min(max(window.x(), available.left()), available.right() - size.width() + 1)
    y = min(max(window.y(), available.top()), available.bottom() - size.height() + 1)
    if (x, y) != (window.x(), window.y()):
        window.move(x, y)


class MainWindow(ViewExports, QMainWindow):
    def __init__(self, settings: QSettings | None = None):
        super().__init__()
        accessible.install()
        self.setWindowTitle("attnviz")
        self.setStatusBar(ElidingStatusBar(self))  # a long message ends in "…" before the model's summary
        self.setAcceptDrops(True)
        self.settings = settings or QSettings()
        self.translator = None
        self.loader = Worker(self)
        self._quit_asked = False  # File > Quit was chosen: the close that follows comes from a person
        self.loading_path: str | None = None
        self.translate_tab = TranslateTab()
        self.tabs = QTabWidget()
        self.train_tab = TrainTab()
        self.tabs.addTab(self.translate_tab, "&Translate")
        self.tabs.addTab(self.train_tab, "Trai&n")  # Alt+R is the Training menu's
        self.analysis_tab = AnalysisTab()
        self.data_folder = DataFolder(self)  # one for the app: the Train tab's field and the Analysis tab read it
        self.data_folder.bind(self.train_tab.form.data_edit)
        self.analysis_tab.set_data_folder(self.data_folder)
        self.tabs.addTab(self.analysis_tab, "Analysis")  # every letter of it has an owner already: Ctrl+3
        self.setCentralWidget(self.tabs)
        self.model_combo = QComboBox()
        self.model_combo.setObjectName("modelCombo")
        self.model_combo.setAccessibleName("Model")
        self.model_combo.setToolTip("Choose a bundled model or a recently opened checkpoint")
        self.model_combo.setMinimumContentsLength(40)
        self.model_label = QLabel(model_summary(None))
        self._build_toolbar()
        self._build_menus()
        self.statusBar().addPermanentWidget(self.model_label)
        self.loader.produced.connect(self._on_loader_produced)
        self.loader.failed.connect(self._on_loader_failed)
        self.translate_tab.status.connect(self._on_tab_status)
        self.translate_tab.mode_changed.connect(self._on_translate_mode_changed)
        self.translate_tab.view_chosen.connect(self.use_view)
        self.train_tab.status.connect(self._on_tab_status)
        self.train_tab.open_checkpoint.connect(self._on_open_trained)
        self.analysis_tab.status.connect(self._on_tab_status)
        self.analysis_tab.open_sentence.connect(self._on_open_sentence)
        self.tabs.currentChanged.connect(self._on_tabs_current_changed)
        self.model_combo.activated.connect(self._on_model_combo_activated)
        self.refresh_models()
        self.resize(first_size(self.screen().availableGeometry()))
        geometry = self.settings.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        fit_to_screen(self)  # a geometry saved on a larger screen never opens partly off this one
        self.translate_tab.restore_settings(self.settings)
        self.train_tab.restore_settings(self.settings)
        self.data_folder.restore(self.settings)

    # -- construction ------------------------------------------------------------------------------------------------

    def _build_toolbar(self) -> None:
        bar = QToolBar("Model")
        bar.setObjectName("modelToolbar")
        bar.setMovable(False)
        label = QLabel("&Model: ")
        label.setBuddy(self.model_combo)
        bar.addWidget(label)
        bar.addWidget(self.model_combo)
        self.addToolBar(bar)

    def _action(self, menu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.setStatusTip(tip or text.replace("&", ""))
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _build_menus(self) -> None:
        tab = self.translate_tab
        file_menu = self.menuBar().addMenu("&File")
        self._action(file_menu, "&Open model file...", self.open_dialog, QKeySequence.StandardKey.Open,
                     "Open a model file: " + "; ".join(f.title for f in file_formats()))
        self._action(file_menu, "Open model &folder...", self.open_folder_dialog, "Ctrl+Shift+O",
                     "Open an imported model's folder: " + "; ".join(f.title for f in folder_formats()))
        self.recent_menu = file_menu.addMenu("Open &recent")
        add_precision_menu(self, file_menu)
        self.prompt_action = add_prompt_action(self, file_menu)
        self._action(file_menu, "Data fol&der...", lambda: self.data_folder.choose(self),
                     tip="The folder with the corpora, for the Train and Analysis tabs")
        file_menu.addSeparator()
        self._action(file_menu, "Export view as &PNG...", lambda: self.export_view("png"), "Ctrl+E")
        self._action(file_menu, "Export view as &SVG...", lambda: self.export_view("svg"), "Ctrl+Shift+S")
        self._action(file_menu, "Export &attention (NPZ + JSON)...", self.export_attention, "Ctrl+Shift+E")
        self._action(file_menu, "Export head &grid as PNG...",
                     lambda: self.export_picture(self.translate_tab.attention.grid, "heads"))
        self._action(file_menu, "Export attention pa&nel as PNG...",
                     lambda: self.export_picture(self.translate_tab.attention, "panel"))
        self._action(file_menu, "&Copy translation", tab.translation_text.copy, "Ctrl+Shift+C",
                     "Copy the finished translation as text")
        file_menu.addSeparator()  # Quit last, alone, as every desktop application has it
        self._action(file_menu, "&Quit", self.quit_by_user, QKeySequence.StandardKey.Quit)
        play = self.menuBar().addMenu("Pla&yback")  # Alt+P is the Train tab's Pause
        self._action(play, "&Translate", tab.translate, "Ctrl+Return")
        self._action(play, "&Play / pause", tab.playback.toggle_play, "Ctrl+Space")
        self._action(play, "Step &back", tab.playback.step_back, "PgUp")
        self._action(play, "Step &forward", tab.playback.step_forward, "PgDown")
        self._action(play, "F&irst step", lambda: tab.go_to(0), "Ctrl+Home")
        self._action(play, "&Last step", lambda: tab.go_to(1 << 30), "Ctrl+End")
        train = self.menuBar().addMenu("T&raining")
        self._action(train, "&Start training", self._start_training, "Ctrl+R")
        self._action(train, "&Pause / resume training", self.train_tab.toggle_pause, "Ctrl+P")
        self._action(train, "S&top training (saves a checkpoint)...", self.train_tab.confirm_stop, "Ctrl+.")
        self._action(train, "&Resume a run...", self.train_tab.resume_dialog)
        for keys, page, text in (("Ctrl+1", self.translate_tab, "Show the Translate tab"),
                                 ("Ctrl+2", self.train_tab, "Show the Train tab"),
                                 ("Ctrl+3", self.analysis_tab, "Show the Analysis tab")):
            self._action(self, text, lambda checked=False, p=page: self.tabs.setCurrentWidget(p), keys)
        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&Keyboard shortcuts", self.show_shortcuts, QKeySequence.StandardKey.HelpContents,
                     "Every keyboard shortcut of the window")
        self._action(help_menu, "&About attnviz", self.about)

    # -- models ------------------------------------------------------------------------------------------------------

    def recent_files(self) -> list[str]:
        value = self.settings.value("models/recent", [])
        return [str(v) for v in ([value] if isinstance(value, str) else value if isinstance(value, list) else []) if v]

    def refresh_models(self) -> None:
        self.model_combo.blockSignals(True)
        self.model_combo.clear()
        for entry in bundled_models():
            self.model_combo.addItem(entry.label, entry.path)
            self.model_combo.setItemData(self.model_combo.count() - 1, entry.tooltip, Qt.ItemDataRole.ToolTipRole)
        for entry in named_entries():
            self.model_combo.addItem(entry.label, entry.path)
            self.model_combo.setItemData(self.model_combo.count() - 1, entry.tooltip, Qt.ItemDataRole.ToolTipRole)
        bundled = {self.model_combo.itemData(i) for i in range(self.model_combo.count())}
        for path in self.recent_files():
            if path not in bundled and Path(path).exists():
                entry = describe(Path(path), False)
                self.model_combo.addItem("Recent: " + entry.label, path)
        current = self.loading_path or (self.translator.metadata.get("path") if self.translator else None)
        if current and self.model_combo.findData(current) < 0:  # the model in use, dropped from the recent list
            self.model_combo.addItem(describe(Path(current), False).label, current)
        self.model_combo.addItem("Open model file...", OPEN_OTHER)
        index = self.model_combo.findData(current) if current else -1
        self.model_combo.setItemText(index, picker_label(self.model_combo.itemText(index), self.loading_path))
        self.model_combo.setCurrentIndex(index)
        self.model_combo.blockSignals(False)
        self.recent_menu.clear()
        for path in self.recent_files():
            self._action(self.recent_menu, path, lambda checked=False, p=path: self.load_model(p))
        self.recent_menu.setEnabled(bool(self.recent_files()))

    def load_model(self, path: str) -> None:
        path = os.path.abspath(path)  # one spelling per file: a bundled model opened by a relative path is not "recent"
        self.loading_path = path
        name = shown_name(path)
        self.statusBar().showMessage(f"Loading model {name}...")
        self.model_label.setText(f"Loading {name}\u2026")  # the model in use is not named as if it were still
        self.translate_tab.set_loading(name)  # nothing translates with the old model meanwhile
        self.refresh_models()  # the picker names the model coming, marked as loading
        self.loader.start(lambda stop: load_job(path, precision(self.settings)))

    @Slot(str)
    def _on_translate_mode_changed(self, mode: str) -> None:
        # Alt+T in both modes (Alt+G is the Train tab's Log scale)
        self.tabs.setTabText(self.tabs.indexOf(self.translate_tab), "Genera&te" if mode == "Generate" else "&Translate")

    @Slot(object)
    def _on_loader_produced(self, translator) -> None:
        self.translator, self.loading_path = translator, None
        apply_prompt(self, translator)
        self.prompt_action.setEnabled(reads_prompt(translator))
        path = translator.metadata.get("path", "")
        self.train_tab.protected_path = path  # Start may not overwrite the model being looked at
        self.translate_tab.set_translator(translator)
        self.analysis_tab.set_translator(translator)
        self.model_label.setText(model_summary(translator.card))
        self.statusBar().showMessage(f"Model ready: {Path(path).name}", 5000)
        self.settings.setValue("models/last", path)
        if not any(path == e.path for e in bundled_models()):
            recent = [path] + [p for p in self.recent_files() if p != path]
            self.settings.setValue("models/recent", recent[:MAX_RECENT])
        self.refresh_models()

    @Slot(object)
    def use_view(self, view) -> None:
        """The model in use with other request settings (its languages, an LLM's prompt): every tab takes the view
        (the shown translation, made with the old settings, is cleared); jobs running keep the view they started
        with, so none reads a half-changed setting."""
        self.translator = view
        self.translate_tab.set_translator(view)
        self.analysis_tab.set_translator(view)
        self.model_label.setText(model_summary(view.card))  # its languages, as the view now has them
        self.statusBar().showMessage("New settings for the model: translate again to see them at work.", 5000)

    @Slot(object)
    def _on_loader_failed(self, failure: JobFailure) -> None:
        self.loading_path = None
        self.refresh_models()  # the picker returns to the model in use
        self.translate_tab.set_loading(None)
        self.model_label.setText(model_summary(self.translator.card if self.translator else None))
        self.statusBar().showMessage("The model could not be loaded", 5000)
        QMessageBox.warning(self, "Cannot open this model", failure.text +
                            ("\n\nThe current model stays loaded." if self.translator else ""))

    @Slot(int)
    def _on_model_combo_activated(self, index: int) -> None:
        path = self.model_combo.itemData(index)
        if path == OPEN_OTHER:
            self.open_dialog()
        elif path and (self.translator is None or path != self.translator.metadata.get("path")):
            self.load_model(path)

    @Slot()
    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open model file", stored(self.settings, "models/dir", ""),
                                              model_file_filter())
        self.refresh_models()
        if path:
            self.settings.setValue("models/dir", str(Path(path).parent))
            self.load_model(path)

    @Slot()
    def open_folder_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open model folder", stored(self.settings, "models/dir", ""))
        if path:
            self.settings.setValue("models/dir", str(Path(path).parent))
            self.load_model(path)

    def dragEnterEvent(self, event) -> None:  # noqa: N802
        if event.mimeData().hasUrls() and len(event.mimeData().urls()) == 1:
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        url = event.mimeData().urls()[0]  # a checkpoint file or an imported model's folder
        if url.isLocalFile():
            self.load_model(url.toLocalFile())

    # -- misc --------------------------------------------------------------------------------------------------------

    @Slot(str)
    def _on_tab_status(self, text: str) -> None:
        self.statusBar().showMessage(text, 8000)

    def show_status(self, text: str) -> None:
        """A message in the status bar for a few seconds."""
        self.statusBar().showMessage(text, 8000)

    def _start_training(self) -> None:
        self.tabs.setCurrentWidget(self.train_tab)
        self.train_tab.start()

    @Slot(str)
    def _on_open_trained(self, path: str) -> None:
        self.tabs.setCurrentWidget(self.translate_tab)
        self.load_model(path)

    @Slot()
    def show_shortcuts(self) -> None:
        dialog = ShortcutsDialog(self, copyable)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
    @Slot(str)
    def _on_open_sentence(self, text: str) -> None:
        self.tabs.setCurrentWidget(self.translate_tab)
        self.translate_tab.source_edit.setText(text)
        self.translate_tab.translate()

    @Slot(int)
    def _on_tabs_current_changed(self, index: int) -> None:
        if self.tabs.widget(index) is self.analysis_tab:
            self.analysis_tab.set_translation(self.translate_tab.current_translation())

    def about(self) -> None:
        QMessageBox.about(self, "About attnviz", f"<b>attnviz {__version__}</b><p>See what attention does inside a "
                          "translation model: every layer, every head, every step.</p>")

    def quit_by_user(self) -> None:
        """File > Quit: a close a person asked for, so a running training may be asked about."""
        self._quit_asked = True
        self.close()

    def _user_closes(self, event) -> bool:
        """Whether a person closes the window and can answer a question: a click or File > Quit on a real screen.
        A close from code (a test, a quit from a signal) or on a platform without a screen has nobody to ask."""
        asked, self._quit_asked = self._quit_asked, False
        return (asked or event.spontaneous()) and QGuiApplication.platformName() not in NO_USER_PLATFORMS

    def _stop_training_to_close(self, user: bool) -> bool:
        """Stop a running training before closing, saving a checkpoint; whether the window may close. A person is
        asked first; without one the run is stopped and saved without a question that nobody could answer."""
        if user and QMessageBox.question(
                self, "Training is running", "A model is still training. Stop it and quit? A checkpoint is saved "
                "first, so the run can be resumed later.",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                QMessageBox.StandardButton.No) != QMessageBox.StandardButton.Yes:
            return False
        self.statusBar().showMessage("Stopping training and saving a checkpoint...")
        if self.train_tab.stop_and_wait():
            return True
        if user:
            QMessageBox.warning(self, "Training did not stop", "Training did not stop in time; the last saved "
                                "checkpoint is intact. The window stays open.")
            return False
        print("attnviz: training did not stop in time; closing anyway, the last saved checkpoint is intact.",
              file=sys.stderr)
        return True

    def closeEvent(self, event) -> None:  # noqa: N802
        user = self._user_closes(event)  # read once, so a File > Quit is not taken for the next close's too
        if self.train_tab.is_running() and not self._stop_training_to_close(user):
            event.ignore()
            return
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.translate_tab.save_settings(self.settings)
        self.train_tab.save_settings(self.settings)
        self.data_folder.save(self.settings)
        self.settings.sync()  # written now: a job that never ends makes run_gui leave without teardown
        # One shared wait for every job (each worker registers itself when made) to notice its stop flag; one that
        # does not (a load from a stalled disk) is left running where it cannot abort the process (see gui.worker),
        # so closing never waits longer.
        wait_all(live_workers(self), CLOSE_WAIT_MS)
        super().closeEvent(event)
