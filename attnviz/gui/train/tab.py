"""The Train tab: pick a recipe, press Start, and watch a model learn.

Training runs in the generic worker as the engine's ``train`` generator, whose events (``TrainEvent``) feed the
tab's Qt-free run document (``run_document.TrainRunDocument``); the curves, the evaluations table and the "attention
forming" view subscribe to it, and the tab itself follows it only for its own controls (buttons, progress, message).
Steps arrive faster than anyone can read, so the document buffers them and the tab flushes it on a timer (four
times a second). Stop asks the engine to save a resumable checkpoint; Pause blocks the worker between steps.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEventLoop, QSettings, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QLabel,
    QProgressBar,
    QPushButton,
    QWidget,
)

from attnviz.engine.corpus.reader import download_name, missing_files
from attnviz.engine.errors import AttnvizError, ConfigError
from attnviz.engine.events import TrainEvent, TrainStep
from attnviz.engine.training.runs import read_run_state, run_checkpoint
from attnviz.gui.train import guard as train_guard
from attnviz.gui.train.curves import CurvesPanel
from attnviz.gui.train.evaluations import EvaluationsPanel
from attnviz.gui.train.forming import FormingPanel
from attnviz.gui.train.layout import lay_out
from attnviz.gui.train.recipe_form import RecipeForm
from attnviz.gui.widgets import named
from attnviz.gui.worker import JobFailure, Worker
from attnviz.session.train.jobs import ONE_PROCESS, TrainJob, download_job, download_text
from attnviz.session.train.run_document import (
    Announced,
    CheckpointsChanged,
    MessageChanged,
    ProgressChanged,
    RunChange,
    TrainRunDocument,
)

REDRAW_MS = 250


def _button(text: str, name: str, tip: str) -> QPushButton:
    return named(QPushButton(text), name, text.replace("&", ""), tip)


class TrainTab(QWidget):
    open_checkpoint = Signal(str)
    status = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.worker = Worker(self)
        self.downloader = Worker(self)
        self.form = RecipeForm()
        self.start_button = _button("&Start", "startButton", "Start training this recipe (Ctrl+R)")
        self.pause_button = _button("Pa&use", "pauseButton", "Pause or resume training (Ctrl+P)")
        self.stop_button = _button("St&op", "stopButton",
                                   "Stop after asking: a checkpoint is saved and the run can be resumed (Ctrl+.)")
        self.resume_button = _button("Resume a run...", "resumeButton",
                                     "Continue a stopped or interrupted run from its training-state file")
        self.download_button = _button("Do&wnload data", "downloadButton", "Download the corpus this recipe needs")
        self.download_button.hide()
        self.open_best_button = _button("Open &best in Translate", "openBestButton",
                                        "Open the best checkpoint so far in the Translate tab")
        self.open_last_button = _button("Open lat&est in Translate", "openLastButton",
                                        "Open the latest checkpoint in the Translate tab")
        self.progress = named(QProgressBar(), "trainProgress", "Training progress")
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.run = TrainRunDocument()
        self.progress_label = QLabel(self.run.status_line)
        self.progress_label.setObjectName("progressLabel")
        self.device_label = named(QLabel(self.run.device_line), "trainDevice", "Training device and processes",
                                  ONE_PROCESS)
        self.device_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message = QLabel()
        self.message.setObjectName("trainMessage")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.hide()
        self.curves = CurvesPanel()
        self.log_check = named(QCheckBox("Lo&g scale"), "logScaleCheck", "Log scale for the loss and rate plots")
        self.export_button = _button("E&xport curves...", "exportCurvesButton", "Save the curves as PNG, SVG or CSV")
        self.evaluations = EvaluationsPanel()
        self.eval_table, self.samples_view = self.evaluations.table, self.evaluations.samples_view
        self.forming = FormingPanel()

        self._run_out = ""
        self._data_missing = False  # the message says the data is missing: a corrected folder clears it
        self.protected_path: str | None = None  # the model open in the Translate tab: Start never overwrites it
        self.ask_output, self.confirm = train_guard.ask_output, train_guard.confirm  # questions; tests answer them
        self._redraw = QTimer(self)
        self._redraw.setInterval(REDRAW_MS)
        lay_out(self)
        self._connect()
        self._update_buttons()

    def _connect(self) -> None:
        self.start_button.clicked.connect(self.start)
        self.pause_button.clicked.connect(self.toggle_pause)
        self.stop_button.clicked.connect(self.confirm_stop)
        self.resume_button.clicked.connect(self.resume_dialog)
        self.download_button.clicked.connect(self.download)
        self.open_best_button.clicked.connect(lambda: self._open("best"))
        self.open_last_button.clicked.connect(lambda: self._open("last"))
        self.log_check.toggled.connect(self.curves.set_log_y)
        self.export_button.clicked.connect(self.export_curves)
        self.form.changed.connect(self._update_buttons)
        self.form.data_edit.textChanged.connect(self._on_data_dir_changed)
        for listener in (self.curves.on_run_changed, self.evaluations.on_run_changed, self.forming.on_run_changed,
                         self._on_run_changed):
            self.run.subscribe(listener)
        self.worker.produced.connect(self._on_event)
        self.worker.failed.connect(self._on_failed)
        self.worker.finished.connect(self._on_finished)
        self.downloader.produced.connect(self._on_download_event)
        self.downloader.failed.connect(self._on_download_failed)
        self.downloader.finished.connect(self._on_download_finished)
        self._redraw.timeout.connect(self._flush)

    # -- state -------------------------------------------------------------------------------------------------------

    def is_running(self) -> bool:
        return self.worker.is_running()

    @property
    def paths(self) -> dict[str, str]:
        """The run's checkpoints so far: "best", "last" -> path."""
        return self.run.paths

    @property
    def total_steps(self) -> int:
        return self.run.total_steps

    @property
    def last_step(self) -> TrainStep | None:
        return self.run.last_step

    @property
    def curve_updates(self) -> int:
        """How often the curves were given new steps (the redraws a run made)."""
        return self.run.flushes

    def _update_buttons(self) -> None:
        running, downloading = self.is_running(), self.downloader.is_running()
        self.start_button.setEnabled(not running and not downloading and self.form.is_valid())
        self.resume_button.setEnabled(not running and not downloading)
        self.pause_button.setEnabled(running and not self.run.stopping)
        self.stop_button.setEnabled(running and not self.run.stopping)
        self.pause_button.setText("Res&ume" if self.run.paused else "Pa&use")  # one letter, Alt+U, for both
        self.form.set_enabled_for_run(running)
        self.open_best_button.setEnabled("best" in self.paths)
        self.open_last_button.setEnabled("last" in self.paths)

    def _show_message(self, text: str) -> None:
        self._data_missing = False
        self.run.set_message(text)

    @Slot(str)
    def _on_data_dir_changed(self, text: str) -> None:
        """A folder that now has the recipe's files clears the "missing" message at once."""
        if not self._data_missing:
            return
        try:
            missing = missing_files(self.form.recipe().corpus, text.strip())
        except (ConfigError, OSError):
            return
        if not missing:
            self._show_message("")
            self.download_button.hide()
            self.run.set_status("The data is there now: press Start.")

    # -- actions -----------------------------------------------------------------------------------------------------

    @Slot()
    def start(self) -> None:
        if self.is_running():
            return
        try:
            recipe = self.form.recipe()
        except ConfigError as exc:
            self._show_message(f"Cannot start: {exc}")
            return
        out, data_dir = self.form.output_path(), self.form.data_dir()
        if not out.endswith(".safetensors"):
            self._show_message("Cannot start: the checkpoint path must end in .safetensors.")
            return
        missing = missing_files(recipe.corpus, data_dir)
        if missing:
            name = download_name(recipe.corpus)
            self._show_message(f"The data for {recipe.name} is missing from {data_dir}: {', '.join(missing)}. " +
                               (f"Press Download data to fetch it (attnviz data download {name}), or choose the "
                                "folder that has it." if name else "Check the file paths."))
            self.download_button.setVisible(bool(name))
            self._data_missing = True
            return
        self.download_button.hide()
        chosen = train_guard.choose_output(self, out, self.protected_path, self.ask_output)
        if chosen is None:
            self._show_message("Not started: the existing checkpoint was kept.")
            return
        if chosen != out:
            self.form.out_edit.setText(chosen)
        self._launch(TrainJob(recipe, chosen, data_dir, resume=False), chosen)

    @Slot()
    def resume_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Resume a training run", str(Path(self.form.output_path()).parent),
                                              "attnviz run files (*.safetensors)")
        if path:
            self.resume_run(path)

    def resume_run(self, path: str) -> None:
        """Continue the run that ``path`` (its best, last, state or epoch file) belongs to."""
        out = str(run_checkpoint(path))
        try:
            state = read_run_state(out)
        except AttnvizError as exc:
            self._show_message(f"Cannot resume: {exc}")
            return
        self._launch(TrainJob(state.recipe, out, self.form.data_dir(), resume=True), out)  # the history follows

    def _launch(self, job: TrainJob, out: str) -> None:
        self._run_out, self._data_missing = out, False
        self.run.begin(job.recipe.name, job.recipe.has_source)
        self.worker.start(job)
        self._redraw.start()
        self._update_buttons()
        self.status.emit(f"Training {job.recipe.name} into {out}")

    @Slot()
    def toggle_pause(self) -> None:
        if not self.is_running():
            return
        self.run.paused = not self.run.paused
        self.worker.pause(self.run.paused)
        self.run.set_status("Paused: press Resume to continue." if self.run.paused else "Resuming...")
        self._update_buttons()

    @Slot()
    def confirm_stop(self) -> None:
        """Stop from the button or menu: asks first unless the run is paused."""
        run = self.run
        if self.is_running() and not run.stopping and train_guard.confirm_stop(self, run.paused, self.confirm):
            self.stop()

    @Slot()
    def stop(self) -> None:
        if not self.is_running() or self.run.stopping:
            return
        self.run.stopping, self.run.paused = True, False
        self.worker.request_stop()
        self.run.set_status("Stopping: saving a checkpoint...")
        self._update_buttons()

    def stop_and_wait(self, timeout_ms: int = 20000) -> bool:
        """Stop, let the engine save, and wait (processing events) until the worker has ended."""
        if not self.is_running():
            return True
        self.stop()
        loop = QEventLoop()
        self.worker.finished.connect(loop.quit)
        QTimer.singleShot(timeout_ms, loop.quit)
        if self.is_running():
            loop.exec()
        return not self.is_running()

    @Slot()
    def download(self) -> None:
        try:
            name = download_name(self.form.recipe().corpus)
        except ConfigError as exc:
            self._show_message(str(exc))
            return
        if not name:
            return
        self._show_message("")
        self.run.set_status(f"Downloading {name} into {self.form.data_dir()}...")
        self.downloader.start(download_job(name, self.form.data_dir()))
        self._update_buttons()

    def _open(self, role: str) -> None:
        if role in self.paths:
            self.open_checkpoint.emit(self.paths[role])

    @Slot()
    def export_curves(self) -> None:
        saved = self.curves.export_dialog(self)
        if saved:
            self.status.emit(f"Saved {saved}")

    # -- events ------------------------------------------------------------------------------------------------------

    @Slot(object)
    def _on_event(self, item: TrainEvent) -> None:
        self.run.feed(item)

    @Slot()
    def _flush(self) -> None:
        self.run.flush()

    def _on_run_changed(self, change: RunChange) -> None:
        """The tab's own controls follow the run; the panels subscribe themselves."""
        match change:
            case ProgressChanged():
                if change.fraction is not None:
                    self.progress.setValue(int(change.fraction * 1000))
                self.progress_label.setText(self.run.status_line)
                self.device_label.setText(self.run.device_line)
            case MessageChanged():
                self.message.setText(self.run.message)
                self.message.setVisible(bool(self.run.message))
            case CheckpointsChanged():
                self._update_buttons()
            case Announced():
                self.status.emit(change.text)

    @Slot(object)
    def _on_failed(self, failure: JobFailure) -> None:
        self.run.failed(failure.text)

    @Slot()
    def _on_finished(self) -> None:
        self.run.flush()
        self._redraw.stop()
        self.run.paused = self.run.stopping = False
        self._update_buttons()

    @Slot(object)
    def _on_download_event(self, progress) -> None:
        self.run.set_status(download_text(progress), progress.done / progress.total if progress.total else 0.0)

    @Slot(object)
    def _on_download_failed(self, failure: JobFailure) -> None:
        self._show_message(f"Download failed: {failure.text}")

    @Slot()
    def _on_download_finished(self) -> None:
        if not self.run.message:
            self.run.set_status("Download complete: press Start.")
            self.download_button.hide()
        self._update_buttons()

    # -- settings ----------------------------------------------------------------------------------------------------

    def save_settings(self, settings: QSettings) -> None:
        self.form.save_settings(settings)
        settings.setValue("train/log_scale", self.log_check.isChecked())

    def restore_settings(self, settings: QSettings) -> None:
        self.form.restore_settings(settings)
        self.log_check.setChecked(str(settings.value("train/log_scale", "false")).lower() == "true")

