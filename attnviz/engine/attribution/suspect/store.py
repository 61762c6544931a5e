"""Where a model's suspect-score calibration (``suspect.rule.Calibration``) is kept, and reading it back.

A checkpoint file keeps it in its card, the attnviz metadata under ``suspect_calibration``, rewritten atomically
through the checkpoint save path (``checkpoints.store``: the tensors are written back as they were stored). An
imported model's folder, or a checkpoint whose weights should stay byte for byte as they are (the bundled models,
kept in git), keeps it in a JSON file beside it, ``NAME.suspect.json``, with a fingerprint of the weights (the size
and header of a checkpoint file, the names and sizes of a folder's files): a file beside other weights is refused.
Reading never fails a model: an unreadable or foreign calibration is reported and the verdict falls back.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.engine.attribution.suspect.rule import Calibration

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

KEY = "suspect_calibration"  # the entry of a checkpoint's attnviz metadata
SIDECAR = ".suspect.json"
MAX_SIDECAR = 4 * 1024 * 1024  # bytes: a calibration is some kilobytes
FORMAT = "attnviz-suspect-calibration"


def sidecar_path(model: str | os.PathLike) -> Path:
    """The file beside a model that keeps its calibration: ``m.safetensors`` -> ``m.suspect.json``, a folder ``f``
    -> ``f.suspect.json`` next to it."""
    path = Path(model)
    return path.parent / (path.name + SIDECAR) if path.is_dir() else path.with_name(path.stem + SIDECAR)


def fingerprint(model: str | os.PathLike) -> str:
    """What identifies a model's weights, cheaply: a checkpoint file's size and header (its metadata records when it
    was written); a folder's file names and sizes."""
    path, digest = Path(model), hashlib.sha256()
    if path.is_dir():
        for item in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")):
            digest.update(f"{item.relative_to(path).as_posix()}\0{item.stat().st_size}\n".encode())
        return "folder:" + digest.hexdigest()
    with open(path, "rb") as f:
        head = f.read(8)
        digest.update(head + f.read(min(int.from_bytes(head, "little"), 100 * 1024 * 1024)))
    return f"file:{path.stat().st_size}:{digest.hexdigest()}"


def stored_calibration(metadata: Mapping[str, Any], path: str | os.PathLike | None) -> tuple[Calibration | None, str]:
    """(the model's calibration or None, where it comes from or why there is none), from its card's ``metadata``,
    else the file beside ``path``."""
    if KEY in metadata:
        try:
            return Calibration.from_dict(metadata[KEY]), "kept in the checkpoint"
        except ValueError as exc:
            return None, f"the calibration kept in the checkpoint cannot be read ({exc}); run attnviz calibrate again"
    if not path or not Path(path).exists():
        return None, "not calibrated"
    side = sidecar_path(path)
    if not side.is_file():
        return None, "not calibrated"
    try:
        if side.stat().st_size > MAX_SIDECAR:
            raise ValueError(f"{side.stat().st_size:,} bytes, more than a calibration holds")
        data = json.loads(side.read_bytes())
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not an attnviz calibration (format {FORMAT!r} missing)")
        calibration = Calibration.from_dict(data.get("calibration") or {})
    except (OSError, ValueError, RecursionError) as exc:
        return None, f"{side.name} cannot be read ({exc}); run attnviz calibrate again"
    if calibration.fingerprint != fingerprint(path):
        return None, f"{side.name} was made for other weights than these; run attnviz calibrate again"
    return calibration, f"kept beside the model in {side.name}"


def calibration_of(translator: Translator) -> tuple[Calibration | None, str]:
    """A loaded model's calibration and where it comes from (``stored_calibration``)."""
    return stored_calibration(translator.metadata, translator.metadata.get("path"))


def store_calibration(model: str | os.PathLike, calibration: Calibration, beside: bool = False) -> Path:
    """Keep ``calibration`` with the model at ``model``: in a checkpoint file's card, or (``beside``, or a folder) in
    the file beside it. Returns the file written. Both writes are atomic."""
    from dataclasses import replace

    from attnviz.engine.checkpoints.store import atomic_write, load_tensors, save_tensors

    path = Path(model)
    if beside or path.is_dir():
        side = sidecar_path(path)
        data = {"format": FORMAT, "calibration": replace(calibration, fingerprint=fingerprint(path)).to_dict()}
        atomic_write(side, (json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8"))
        return side
    meta, tensors = load_tensors(path)
    meta[KEY] = replace(calibration, fingerprint="").to_dict()
    save_tensors(path, tensors, meta, half=meta.get("dtype") == "float16")
    return path
