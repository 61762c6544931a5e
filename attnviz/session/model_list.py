"""Which models the picker offers: the bundled checkpoints (described from their headers, without torch), the models
the Hugging Face cache and Ollama's store hold, and the recently opened files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnviz.engine.checkpoints.card import ModelCard
from attnviz.engine.checkpoints.memory import size_text
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub import file_formats
from attnviz.engine.hub.names import name_of, named_models
from attnviz.engine.loading import read_card
from attnviz.paths import bundled_model_files, default_model_path

CHECKPOINT_SUFFIX = ".safetensors"

# the default is chosen in paths
__all__ = ["ModelEntry", "bundled_models", "default_model_path", "describe", "model_summary", "named_entries",
           "model_file_filter", "picker_label", "shown_name"]


@dataclass(frozen=True)
class ModelEntry:
    path: str
    label: str
    tooltip: str
    bundled: bool


def describe(path: Path, bundled: bool) -> ModelEntry:
    try:
        card = read_card(path)
    except Exception as exc:  # noqa: BLE001 - a picker entry never stops the window: what failed is its tooltip
        text = str(exc) if isinstance(exc, CheckpointError) else f"{type(exc).__name__}: {str(exc)[:200]}"
        return ModelEntry(str(path), f"{path.name} (unreadable)", text, bundled)
    title = card.title.replace(" -> ", " \u2192 ")
    headline = card.headline()
    label = f"{title} · {card.name or path.stem}" + (f" · {headline}" if headline else "")
    tip = f"{path}\n{title}" + "".join(f"\n{split}: " + ", ".join(f"{k} {v:.3g}" for k, v in m.numbers().items())
                                       for split, m in card.metrics.items())
    return ModelEntry(str(path), label, tip, bundled)


def bundled_models() -> list[ModelEntry]:
    return [describe(p, True) for p in bundled_model_files()]


def shown_name(path: str) -> str:
    """How a model file or folder is named while it loads: the name it goes by in the Hugging Face cache or
    Ollama's store, else its file name without the checkpoint suffix."""
    return name_of(path) or Path(path).name.removesuffix(CHECKPOINT_SUFFIX) or str(path)


def model_file_filter() -> str:
    """An open dialog's filter of every model file format (``engine.hub``), then each alone, then any file."""
    formats = file_formats()
    every = " ".join(f"*{suffix}" for f in formats for suffix in f.suffixes)
    each = [f"{f.title.split(' (')[0]} ({' '.join('*' + s for s in f.suffixes)})" for f in formats if f.suffixes]
    return ";;".join([f"Model files ({every})", *each, "All files (*)"])


def named_entries() -> list[ModelEntry]:
    """The picker's entries for the models the Hugging Face cache and Ollama's store hold, with their sizes (no
    file is read: a large cache lists at once)."""
    return [ModelEntry(str(m.path), f"{m.source}: {m.name} · {size_text(m.size)}",
                       f"{m.name}\n{m.path}\n{size_text(m.size)} on disk ({m.source}; -m {m.name})", False)
            for m in named_models()]


def picker_label(label: str, loading: str | None) -> str:
    """The picker's words for the model it shows: ``label``, marked while the model is still ``loading`` (its path),
    so the picker names the model coming without passing it off as the one in use (first: a narrow picker cuts
    the end)."""
    return f"Loading\u2026 {label}" if loading else label


def model_summary(card: ModelCard | None) -> str:
    """The status bar's words for the model in use (None: none): languages, size, and the precision it runs at where
    that is not what its weights are stored as (File > Precision)."""
    if card is None:
        return "No model"
    precision = f" · {card.runs_as} (stored as {card.dtype})" if card.runs_as not in (None, card.dtype) else ""
    return f"{card.languages} · {card.parameters:,} parameters{precision}"
