"""What the Train tab hands its workers, and how it words their progress: the engine's training generator and the
corpus download (the ETA's clock is the engine's, ``engine.training.clock``). Qt-free; the engine is imported
only when a job runs."""

from __future__ import annotations

import threading


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
