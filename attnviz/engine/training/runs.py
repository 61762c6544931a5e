"""A training run's files, and what its training-state file says, found from any one of them.

Torch-free (headers are read as JSON), so the GUI can inspect a run on its own thread before resuming it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from attnviz.engine.checkpoints.header import read_header
from attnviz.engine.errors import CheckpointError
from attnviz.engine.records import EvalRecord
from attnviz.engine.training.presets import Recipe


@dataclass
class RunPaths:
    best: Path

    @property
    def stem(self) -> Path:
        return self.best.with_suffix("")

    @property
    def last(self) -> Path:
        return self.stem.with_suffix(".last.safetensors")

    @property
    def state(self) -> Path:
        return self.stem.with_suffix(".state.safetensors")

    @property
    def views(self) -> Path:
        """What the run's views showed (curves, evaluations, forming): ``engine.training.views_file``."""
        return self.stem.with_suffix(".views.npz")

    def epoch(self, n: int) -> Path:
        return self.stem.with_suffix(f".epoch{n}.safetensors")


def run_checkpoint(path: str | os.PathLike) -> Path:
    """The run (its best checkpoint's path) that any of its files belongs to: best, last, state or an epoch."""
    path = Path(path)
    name = path.name
    for marker in (".last.safetensors", ".state.safetensors"):
        if name.endswith(marker):
            return path.with_name(name[: -len(marker)] + ".safetensors")
    stem, dot, rest = name.rpartition(".epoch")
    if dot and rest.removesuffix(".safetensors").isdigit():
        return path.with_name(stem + ".safetensors")
    return path


@dataclass(frozen=True)
class RunState:
    recipe: Recipe  # what the run was started with
    history: tuple[EvalRecord, ...]  # its evaluations so far


def read_run_state(out: str | os.PathLike) -> RunState:
    """Read a run's training-state file (what resuming needs); CheckpointError when it has none."""
    paths = RunPaths(run_checkpoint(out))
    if not paths.state.exists():
        raise CheckpointError(f"cannot resume {out}: its training-state file {paths.state} does not exist (nothing "
                              "of the run was saved yet, or this file is not part of a run).")
    meta, _ = read_header(paths.state)
    return RunState(Recipe.from_dict(meta["recipe"]), tuple(EvalRecord.from_dict(r) for r in meta.get("history", [])))


def recipe_of_run(out: str | os.PathLike) -> Recipe:
    """The recipe a run was started with (for resuming)."""
    return read_run_state(out).recipe
