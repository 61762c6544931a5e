"""Export of attention tensors: an NPZ of plain numeric and string arrays plus a JSON sidecar describing it.

Both files load without pickle (``np.load(path)`` with the default ``allow_pickle=False``). Keys are
``<prefix><kind>`` for the matrices and ``<prefix>src_tokens`` / ``<prefix>tokens`` for the labels, with prefix
``s0_``, ``s1_``... when several translations share one file. Pieces merged into words keep their per-step figures,
which belong to the pieces decoded: ``<prefix>step_tokens`` names them. The sidecar names the model (its card's name,
else its file name), never the path of the user's file.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.engine.checkpoints.store import atomic_write
from attnviz.engine.events import ATTENTION_KINDS, Translation
from attnviz.engine.subwords import WordAttention


def attention_arrays(translations: Sequence[Translation | WordAttention]) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for i, tr in enumerate(translations):
        prefix = f"s{i}_" if len(translations) > 1 else ""
        arrays[prefix + "src_tokens"] = np.array(tr.src_tokens, dtype=str)
        arrays[prefix + "tokens"] = np.array(tr.tokens, dtype=str)
        for kind, matrix in tr.attention.items():
            arrays[prefix + kind] = matrix.astype(np.float32)
        arrays.update({prefix + k: v for k, v in step_arrays(tr).items()})
    return arrays


def step_arrays(tr: Translation | WordAttention) -> dict[str, np.ndarray]:
    """Per output step: the chosen token's probability [T], the entropy [T] (nats), and the top-k candidates'
    tokens and probabilities [T, k] (only the probabilities when the translation kept no steps). Words merged from
    pieces keep the pieces' steps, named by ``step_tokens`` [T]."""
    steps = tr.steps
    if not steps:
        return {"probabilities": np.array(tr.probabilities, dtype=np.float32)}
    k = min(len(s.topk) for s in steps)
    pieces = {"step_tokens": np.array(tr.step_tokens, dtype=str)} if isinstance(tr, WordAttention) else {}
    return {**pieces, "probabilities": np.array([s.probability for s in steps], dtype=np.float32),
            "entropy": np.array([s.entropy for s in steps], dtype=np.float32),
            "topk_tokens": np.array([[t for t, _ in s.topk[:k]] for s in steps], dtype=str),
            "topk_probabilities": np.array([[p for _, p in s.topk[:k]] for s in steps], dtype=np.float32)}


def model_name(model_info: dict[str, Any]) -> str:
    """How an export names its model: the card's name, else its file or folder name (never the full path, which
    says where the user keeps files and nothing about the model)."""
    return str(model_info.get("name") or Path(str(model_info.get("path") or "")).name or "unnamed model")


def save_attention(path: str | os.PathLike, translations: Sequence[Translation | WordAttention],
                   model_info: dict[str, Any], sources: Sequence[str] | None = None,
                   extra: tuple[dict[str, np.ndarray], dict[str, Any]] | None = None) -> Path:
    """Write ``path`` (.npz) and ``path`` with suffix .json; returns the sidecar's path. ``sources`` are the texts
    as typed, one per translation, kept in the sidecar (the tokens alone lose case and spacing). ``extra`` adds
    arrays and sidecar entries (an attribution shown beside the attention: its maps, method and settings)."""
    path = Path(path)
    arrays = {**attention_arrays(translations), **(extra[0] if extra else {})}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]  # numpy's stub lets ** keys reach allow_pickle
    atomic_write(path, buffer.getvalue())
    sidecar = {
        "model": {"name": model_name(model_info),
                  **{k: model_info.get(k) for k in ("languages", "src_lang", "tgt_lang", "model")}},
        "kinds": {k: {"label": v.label, "rows": v.query_axis, "columns": v.key_axis}
                  for k, v in ATTENTION_KINDS.items()},
        "layout": "each matrix is [layers, heads, rows, columns]; rows are queries, columns keys; index i of the "
                  "layers or heads axis is layer or head i + 1 as the views and --mask-heads number them",
        "translations": [
            {"prefix": f"s{i}_" if len(translations) > 1 else "", "src_tokens": list(tr.src_tokens),
             "source": sources[i] if sources is not None and i < len(sources) else None,
             "tokens": list(tr.tokens), "text": tr.text, "warnings": list(tr.warnings),
             "units": "words (subword pieces merged)" if isinstance(tr, WordAttention) else "tokens",
             "step_units": "pieces (step_tokens)" if isinstance(tr, WordAttention) else "tokens",
             "steps": [{"token": st.token, "probability": round(st.probability, 6), "entropy": round(st.entropy, 6),
                        "topk": [[t, round(p, 6)] for t, p in st.topk]} for st in tr.steps],
             "shapes": {k: list(m.shape) for k, m in tr.attention.items()}}
            for i, tr in enumerate(translations)
        ],
    }
    sidecar.update(extra[1] if extra else {})
    json_path = path.with_suffix(".json")
    atomic_write(json_path, json.dumps(sidecar, indent=2, ensure_ascii=False).encode("utf-8"))
    return json_path
