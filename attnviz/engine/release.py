"""Preparing a trained checkpoint for bundling: measure it on val and test (greedy and beam), decide whether
float16 storage is lossless enough, and write one self-describing file whose metadata carries the figures.

The figures stored are exactly those ``attnviz evaluate --json`` prints, so the app, ``attnviz info`` and the
model cards show the same numbers.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from attnviz.config import DecodeConfig
from attnviz.engine.errors import AttnvizError, ConfigError
from attnviz.engine.evaluation import evaluate_split
from attnviz.engine.translator import load_translator

HALF_TOLERANCE = 0.1  # bleu_tok points float16 storage may cost


def _measure(translator, recipe_name: str | None, data_dir, beam: int) -> Iterator[tuple[str, dict]]:
    for split in ("val", "test"):
        for width in sorted({1, beam}):
            try:
                report = evaluate_split(translator, split, DecodeConfig(beam=width), recipe_name, data_dir)
            except AttnvizError as exc:  # a corpus without a test split: skip it
                yield f"{split}_missing", {"reason": str(exc)}
                break
            yield (split if width == 1 else f"{split}_beam{width}"), report


def release(src: str | os.PathLike, dst: str | os.PathLike, name: str | None = None, beam: int = 5,
            half: str = "auto", data_dir=None) -> dict:
    """Write ``dst`` from ``src`` with measured metrics; returns the metrics. ``half``: "auto", "yes" or "no"."""
    translator = load_translator(src)
    metrics = {key: report for key, report in _measure(translator, None, data_dir, beam) if "missing" not in key}
    if not metrics:
        raise ConfigError(f"{src}: nothing to measure it on (no val or test split could be read)")
    store_half = half == "yes"
    if half == "auto":
        with tempfile.TemporaryDirectory() as tmp:
            probe = Path(tmp) / "half.safetensors"
            translator.save(probe, half=True)
            split = "test" if "test" in metrics else "val"
            halved = evaluate_split(load_translator(probe), split, DecodeConfig(), None, data_dir)
        delta = halved["bleu_tok"] - metrics[split]["bleu_tok"]
        store_half = abs(delta) <= HALF_TOLERANCE
        metrics["float16_check"] = {"split": split, "bleu_tok_float32": metrics[split]["bleu_tok"],
                                    "bleu_tok_float16": halved["bleu_tok"], "stored_as_float16": store_half}
    translator.save(dst, half=store_half, name=name or translator.metadata.get("name", Path(dst).stem),
                    metrics=metrics)
    return metrics
