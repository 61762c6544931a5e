"""A run's resume point as one atomic unit, repaired on resume, and what a failed save tells the user.

Design: the training-state file (``run.state.safetensors``) is self-sufficient. Besides the optimizer slots, the
RNG and the data position it holds the model's weights (tensors ``model.<name>``) and the metadata of the matching
``run.last.safetensors`` (entry ``checkpoint``). A resume point is written state first, then ``.last``, each with
an atomic rename, so whatever moment a kill, a crash or a full disk strikes, the state file on disk is a whole,
consistent resume point (the old one or the new one). On resume, ``restore_last`` rewrites ``.last`` from the
state file when the two disagree (``.last`` older, or missing because the very first save was cut short) and says
so. When no state file exists yet (a kill cut the very first save sequence short), the run resumes from the
newest checkpoint that says where training stood (``runs.saved_checkpoint``: the best file is written first and
carries ``resume_at``), its optimizer started afresh; with none, nothing of the run was saved and the message says
exactly that. Temporary files that a kill left behind (``.NAME.XXXX.tmp`` beside the run's files) are removed
when the run starts or resumes, or when resuming finds nothing to resume (``runs.remove_stale_temps``). A save
that fails (disk full, folder removed) raises ``SaveError``, which the training loop turns into a ``TrainFailed``
naming the last good checkpoint; the files already on disk are never touched by a failed save.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

from attnviz.engine.errors import AttnvizError, CheckpointError
from attnviz.engine.training.runs import RunPaths

WEIGHT_PREFIX = "model."


class SaveError(AttnvizError):
    """A checkpoint could not be written; the previous files are intact."""


def save_failed(path: Path, exc: OSError) -> SaveError:
    """The one-line message for an OSError raised while writing ``path``."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = "the disk is full: free some space"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "the folder cannot be written: fix its permissions or choose another --out"
    else:
        hint = "check the folder"
    return SaveError(f"could not save {path} ({reason}); {hint}, then resume the run. Files already on disk "
                     "were not changed.")


def weights_entries(weights: dict[str, Any]) -> dict[str, Any]:
    """The model weights as the state file stores them."""
    return {WEIGHT_PREFIX + k: v for k, v in weights.items()}


def restore_last(paths: RunPaths) -> str | None:
    """Make ``.last`` match the state file (see the module docstring); returns a note when it was rewritten."""
    from attnviz.engine.checkpoints.store import load_tensors, read_header, save_tensors

    if not paths.state.exists():
        raise CheckpointError(f"cannot resume {paths.best}: nothing of this run was saved yet (it stopped before "
                              "its first checkpoint). Start it again.")
    state_meta, _ = read_header(paths.state)
    last_step = None
    if paths.last.exists():
        try:
            last_step = read_header(paths.last)[0].get("step")
        except CheckpointError:
            last_step = None  # an unreadable .last is rebuilt from the state below
    if last_step == state_meta.get("step"):
        return None
    if not isinstance(state_meta.get("checkpoint"), dict):  # written by an attnviz before self-sufficient states
        raise CheckpointError(f"{paths.state.name} (step {state_meta.get('step')}) does not belong to "
                              f"{paths.last.name} (step {last_step}), and it holds no weights to repair it.")
    _, tensors = load_tensors(paths.state)
    weights = {k[len(WEIGHT_PREFIX):]: v for k, v in tensors.items() if k.startswith(WEIGHT_PREFIX)}
    meta = {k: v for k, v in state_meta["checkpoint"].items() if k not in ("format", "format_version", "dtype")}
    was = f"at step {last_step}" if last_step is not None else "missing" if not paths.last.exists() else "damaged"
    try:
        save_tensors(paths.last, weights, meta)
    except OSError as exc:
        raise save_failed(paths.last, exc) from None
    return (f"{paths.last.name} was {was} (a save was cut short); rebuilt it from {paths.state.name} "
            f"(step {state_meta.get('step')}).")
