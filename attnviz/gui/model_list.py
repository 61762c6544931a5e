"""Which models the picker offers: the bundled checkpoints (described from their headers, without torch) and the
recently opened files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnviz.config import LANGUAGE_MODEL_KINDS
from attnviz.engine.errors import CheckpointError
from attnviz.engine.header import read_header
from attnviz.engine.tokenize import languages_label
from attnviz.gui.paths import models_dir

DEFAULT_MODEL = "de-en-multi30k.safetensors"


@dataclass(frozen=True)
class ModelEntry:
    path: str
    label: str
    tooltip: str
    bundled: bool


def describe(path: Path, bundled: bool) -> ModelEntry:
    try:
        meta, _ = read_header(path)
    except CheckpointError as exc:
        return ModelEntry(str(path), f"{path.name} (unreadable)", str(exc), bundled)
    src, tgt = meta.get("src_tokenizer", {}), meta.get("tgt_tokenizer", {})
    kind = (meta.get("model") or {}).get("kind", "transformer")
    langs = languages_label(src.get("lang", "?"), tgt.get("lang", "?"), kind not in LANGUAGE_MODEL_KINDS,
                            tgt.get("mode", "spacy"))
    langs = langs.replace(" -> ", " \u2192 ") + (" (LSTM)" if kind == "rnn-attention" else "")
    metrics = meta.get("metrics") or {}
    test, val = metrics.get("test") or {}, metrics.get("val") or {}
    headline = (f" · test BLEU {test['bleu_tok']:.1f}" if "bleu_tok" in test else
                f" · val loss {val['loss']:.3f}" if "loss" in val else "")
    label = f"{langs} · {meta.get('name') or path.stem}{headline}"
    tip = f"{path}\n{langs}" + "".join(f"\n{split}: " + ", ".join(f"{k} {v:.3g}" for k, v in values.items()
                                                                     if isinstance(v, (int, float)))
                                        for split, values in (meta.get("metrics") or {}).items())
    return ModelEntry(str(path), label, tip, bundled)


def bundled_models() -> list[ModelEntry]:
    folder = models_dir()
    paths = sorted(folder.glob("*.safetensors"), key=lambda p: (p.name != DEFAULT_MODEL, p.name))
    return [describe(p, True) for p in paths]


def default_model_path() -> str | None:
    models = bundled_models()
    return models[0].path if models else None
