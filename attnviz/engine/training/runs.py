"""A training run's files, and what its training-state file says, found from any one of them.

Torch-free (headers are read as JSON), so the GUI can inspect a run on its own thread before resuming it.
"""

from __future__ import annotations

import os
import re
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


def remove_stale_temps(paths: RunPaths) -> list[str]:
    """Delete temporary files that a killed save of this run left behind; returns their names."""
    folder = paths.best.parent
    if not folder.is_dir():
        return []
    names = [p.name for p in (paths.best, paths.last, paths.state, paths.views)]
    epoch = re.compile(re.escape(f".{paths.stem.name}.epoch") + r"\d+\.safetensors\..+\.tmp$")
    removed = []
    for entry in folder.iterdir():
        n = entry.name
        ours = any(n.startswith(f".{name}.") for name in names) or epoch.match(n)
        if ours and n.endswith(".tmp") and entry.is_file():
            try:
                entry.unlink()
            except OSError:
                continue  # a read-only folder: the next save fails with its own clear message
            removed.append(n)
    return removed


RESUME_AT = "resume_at"  # a checkpoint's [epoch, batch index]: where training stood when it was saved


def saved_checkpoint(paths: RunPaths) -> tuple[Path, dict] | None:
    """A run whose training-state file was never written (a kill cut its very first save sequence short, after the
    best checkpoint) still resumes: the newest of its checkpoints that says where training stood (``resume_at``,
    with its recipe), with that checkpoint's metadata; None when there is none."""
    found = []
    for path in (paths.best, paths.last):
        try:
            meta = read_header(path)[0] if path.exists() else {}
        except CheckpointError:
            continue  # a damaged file is no resume point
        at = meta.get(RESUME_AT)
        if (isinstance(at, list) and len(at) == 2 and all(type(v) is int for v in at)
                and type(meta.get("step")) is int and isinstance(meta.get("recipe"), dict)):
            found.append((meta["step"], path, meta))
    if not found:
        return None
    _, path, meta = max(found, key=lambda f: f[0])
    return path, meta


@dataclass(frozen=True)
class RunState:
    recipe: Recipe  # what the run was started with
    history: tuple[EvalRecord, ...]  # its evaluations so far


def read_run_state(out: str | os.PathLike) -> RunState:
    """Read a run's training-state file (what resuming needs); CheckpointError when it has none."""
    paths = RunPaths(run_checkpoint(out))
    found = saved_checkpoint(paths) if not paths.state.exists() else None
    if found is not None:
        meta = found[1]
        return RunState(Recipe.from_dict(meta["recipe"]),
                        tuple(EvalRecord.from_dict(r) for r in meta.get("history", []) if isinstance(r, dict)))
    if not paths.state.exists():
        removed = remove_stale_temps(paths)  # a kill's leftovers: nothing will ever read them
        cleaned = f"; removed {', '.join(removed)}, left behind by a save that was cut short" if removed else ""
        raise CheckpointError(f"cannot resume {out}: its training-state file {paths.state} does not exist (nothing "
                              f"of the run was saved yet, or this file is not part of a run){cleaned}.")
    meta, _ = read_header(paths.state)
    return RunState(Recipe.from_dict(meta["recipe"]), tuple(EvalRecord.from_dict(r) for r in meta.get("history", [])))


def recipe_of_run(out: str | os.PathLike) -> Recipe:
    """The recipe a run was started with (for resuming)."""
    return read_run_state(out).recipe
