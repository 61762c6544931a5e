"""Which models the picker offers: the bundled checkpoints (described from their headers, without torch) and the
recently opened files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnviz.engine.errors import CheckpointError
from attnviz.engine.loading import read_card
from attnviz.paths import models_dir

DEFAULT_MODEL = "de-en-multi30k.safetensors"


@dataclass(frozen=True)
class ModelEntry:
    path: str
    label: str
    tooltip: str
    bundled: bool


def describe(path: Path, bundled: bool) -> ModelEntry:
    try:
        card = read_card(path)
    except CheckpointError as exc:
        return ModelEntry(str(path), f"{path.name} (unreadable)", str(exc), bundled)
    title = card.title.replace(" -> ", " \u2192 ")
    headline = card.headline()
    label = f"{title} · {card.name or path.stem}" + (f" · {headline}" if headline else "")
    tip = f"{path}\n{title}" + "".join(f"\n{split}: " + ", ".join(f"{k} {v:.3g}" for k, v in m.numbers().items())
                                       for split, m in card.metrics.items())
    return ModelEntry(str(path), label, tip, bundled)


def bundled_models() -> list[ModelEntry]:
    folder = models_dir()
    paths = sorted(folder.glob("*.safetensors"), key=lambda p: (p.name != DEFAULT_MODEL, p.name))
    return [describe(p, True) for p in paths]


def default_model_path() -> str | None:
    models = bundled_models()
    return models[0].path if models else None
