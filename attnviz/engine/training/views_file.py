"""What a run's views showed, kept beside its resume point so that a resumed run continues its curves and its
attention-forming strip instead of starting them again (``run.views.npz``).

The file holds every training step's figures (step, epoch, loss, learning rate, tokens/s) and every evaluation as
its ``EvalResult``: the record, the sample outputs and the probe sentence's tokens with the attention the forming
view follows. It is an NPZ read with ``allow_pickle=False`` (nothing in it can run code), with the text parts as one
JSON entry, and it is written atomically just before the training-state file, so it is never behind the resume
point; on resume the entries after the resume point's step are dropped. A run saved before this file existed, or
one whose file cannot be read, resumes with its evaluations from the state file and a note saying why the curve
starts empty.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.engine.events import EvalResult, Sample, TrainHistory, TrainStep, Translation
from attnviz.engine.records import EvalRecord

FORMAT = "attnviz run views 1"
PROBE_KINDS = ("cross", "decoder")  # what the forming view shows: cross-attention, or a language model's self


def step_row(event: TrainStep) -> tuple[float, float, float, float, float]:
    """The figures of a step the curves draw, as one row of the file's ``steps`` array."""
    return (event.step, event.epoch, event.loss, event.lr, event.tokens_per_s)


def _probe_json(probe: Translation | None, index: int, arrays: dict[str, np.ndarray]) -> dict[str, Any] | None:
    kind = next((k for k in PROBE_KINDS if k in probe.attention), None) if probe is not None else None
    if probe is None or kind is None:
        return None
    arrays[f"probe{index}"] = np.asarray(probe.attention[kind], dtype=np.float32)
    return {"src_tokens": list(probe.src_tokens), "tokens": list(probe.tokens), "text": probe.text, "kind": kind}


def save_views(path: Path, steps: Sequence[tuple[float, ...]], evaluations: Sequence[EvalResult]) -> None:
    """Write the views' history atomically (the old file stays whole if this is cut short)."""
    from attnviz.engine.checkpoints.store import atomic_write

    arrays: dict[str, np.ndarray] = {"steps": np.asarray(steps, dtype=np.float64).reshape(-1, 5)}
    entries = [{"record": e.record.to_dict(), "samples": [[s.output, s.source, s.reference] for s in e.samples],
                "probe": _probe_json(e.probe, i, arrays)} for i, e in enumerate(evaluations)]
    meta = json.dumps({"format": FORMAT, "evaluations": entries}, ensure_ascii=False).encode("utf-8")
    arrays["meta"] = np.frombuffer(meta, dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # numpy types allow_pickle among the kwargs
    atomic_write(path, buffer.getvalue())


def _evaluation(entry: dict[str, Any], data) -> EvalResult:
    probe, found = None, entry.get("probe")
    if found is not None:
        key = f"probe{entry['index']}"
        probe = Translation(tuple(found["src_tokens"]), tuple(found["tokens"]), str(found["text"]),
                            {str(found["kind"]): data[key]})
    samples = tuple(Sample(*s) for s in entry.get("samples", ()))
    return EvalResult(EvalRecord.from_dict(entry["record"]), samples, probe)


def read_views(path: Path, upto_step: int) -> TrainHistory:
    """The history up to the resume point's step; ``ValueError`` (its message says why) when it is unreadable."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(bytes(data["meta"]).decode("utf-8"))
            if meta.get("format") != FORMAT:
                raise ValueError(f"{path.name} is not a {FORMAT!r} file")
            rows = data["steps"]
            steps = tuple(TrainStep(int(r[0]), int(r[1]), float(r[2]), float(r[3]), float(r[4]), 0.0, 0.0)
                          for r in rows if r[0] <= upto_step)
            evaluations = tuple(_evaluation(dict(entry, index=i), data)
                                for i, entry in enumerate(meta["evaluations"]) if entry["record"]["step"] <= upto_step)
    except (OSError, KeyError, TypeError, IndexError, AttributeError, RecursionError, zipfile.BadZipFile,
            json.JSONDecodeError, UnicodeDecodeError) as exc:  # a run copied from elsewhere may hold anything
        raise ValueError(f"{path.name} cannot be read ({exc})") from None
    return TrainHistory(steps, evaluations)


def restored_history(path: Path, upto_step: int, records: Sequence[EvalRecord]) -> tuple[TrainHistory, str | None]:
    """The history a resumed run shows, and a note when its views file was missing or unreadable (then only the
    evaluations' figures from the state file come back)."""
    try:
        return read_views(path, upto_step), None
    except ValueError as exc:
        reason = "it was saved before attnviz kept one" if not path.exists() else str(exc)
        fallback = TrainHistory((), tuple(EvalResult(r, (), None) for r in records))
        return fallback, (f"the loss curve and the attention-forming strip start at step {upto_step}: the run's "
                          f"views file {path.name} is missing or unreadable ({reason}).")
