"""What the Train tab hands its workers, and how it words their progress: the engine's training generator and the
corpus download, and a line for each training event the tab shows (the ETA's clock is the engine's,
``engine.training.clock``). Qt-free; the engine's training loop is imported only when a job runs."""

from __future__ import annotations

import threading

from attnviz.engine.events import EvalStarted, TrainFailed, TrainFinished, TrainStarted, TrainStep, TrainStopped
from attnviz.engine.training.clock import format_left


class TrainJob:
    """Worker job: the engine's training generator (it saves a checkpoint itself when asked to stop)."""

    handles_stop = True

    def __init__(self, recipe, out: str, data_dir: str, resume: bool):
        self.recipe, self.out, self.data_dir, self.resume = recipe, out, data_dir, resume

    def __call__(self, stop: threading.Event):
        from attnviz.engine.training.loop import train

        return train(self.recipe, self.out, self.data_dir, resume=self.resume, stop=stop)


def download_job(name: str, data_dir: str):
    """Worker job: download corpus ``name`` into ``data_dir`` (progress events)."""
    def job(stop: threading.Event):
        from attnviz.engine.corpus.download import download

        return download(name, data_dir)

    return job


ONE_PROCESS = ("the app trains in one process; for several (DistributedDataParallel), run attnviz train --nproc N "
               "in a terminal")


def run_where(device: str, processes: int = 1) -> str:
    """The device and the number of processes a run uses, as the Train tab shows them."""
    return f"Device: {device} · {processes} process{'es' if processes != 1 else ''}"


def download_text(progress) -> str:
    """A download progress event as a line."""
    return (f"Downloading {progress.file}: {progress.done / 1e6:.1f} MB"
            + (f" of {progress.total / 1e6:.1f} MB" if progress.total else ""))


def started_text(event: TrainStarted) -> str:
    resumed = f", resumed at step {event.resumed_from_step:,}" if event.resumed_from_step else ""
    return (f"{event.parameters:,} parameters, {event.train_pairs:,} training pairs, {event.total_steps:,} steps on "
            f"{event.device}{resumed}")


def step_text(step: TrainStep, total_steps: int) -> str:
    return (f"Epoch {step.epoch} · step {step.step:,} of {total_steps:,} · loss {step.loss:.3f} · "
            f"{step.tokens_per_s:,.0f} tokens/s · {format_left(step.eta_s)}")


def evaluating_text(event: EvalStarted) -> str:
    what = f"translating {event.sentences:,} validation sentences for BLEU" if event.sentences else "sampling"
    return f"Evaluating at step {event.step:,}: validation loss, then {what}. This can take a minute..."


def finished_text(event: TrainFinished) -> str:
    if event.best_path:
        return f"Finished. Best checkpoint: {event.best_path}"
    return f"Finished before any evaluation: no best checkpoint; last: {event.last_path}"


def stopped_text(event: TrainStopped) -> str:
    return f"Stopped at step {event.step:,}; saved {event.last_path}. Resume run continues from there."


def failed_text(event: TrainFailed) -> str:
    if event.last_good:
        return f"{event.message} The last good checkpoint is {event.last_good}."
    return f"{event.message} No checkpoint had been saved yet."
