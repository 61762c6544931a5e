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

from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import AttnvizError, ConfigError
from attnviz.engine.loading import load_translator
from attnviz.engine.training.evaluation import evaluate_split

HALF_TOLERANCE = {"bleu_tok": 0.1, "loss": 0.001}  # what float16 storage may cost: BLEU points, or a language
# model's validation loss in nats per token


def _measure(translator, recipe_name: str | None, data_dir, beam: int) -> Iterator[tuple[str, dict]]:
    widths = sorted({1, beam}) if translator.has_source else [1]  # a language model is measured teacher forced
    for split in ("val", "test"):
        for width in widths:
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
    measured = dict(_measure(translator, None, data_dir, beam))
    metrics = {key: report for key, report in measured.items() if "missing" not in key}
    if not metrics:
        reasons = "; ".join(dict.fromkeys(report["reason"] for report in measured.values()))  # each once
        raise ConfigError(f"{src}: nothing to measure it on: {reasons}")
    store_half = half == "yes"
    if half == "auto":
        with tempfile.TemporaryDirectory() as tmp:
            probe = Path(tmp) / "half.safetensors"
            translator.save(probe, half=True)
            split = "test" if "test" in metrics else "val"
            halved = evaluate_split(load_translator(probe), split, DecodeConfig(), None, data_dir)
        key = "bleu_tok" if "bleu_tok" in halved else "loss"
        store_half = abs(halved[key] - metrics[split][key]) <= HALF_TOLERANCE[key]
        metrics["float16_check"] = {"split": split, f"{key}_float32": metrics[split][key],
                                    f"{key}_float16": halved[key], "stored_as_float16": store_half}
    translator.save(dst, half=store_half, name=name or translator.metadata.get("name", Path(dst).stem),
                    metrics=metrics)
    return metrics
