"""``attnviz align --out FILE.npz``: an alignment run's arrays with a JSON sidecar that reproduces it.

The archive holds ``links`` [K, 3] int32 (sentence, source word, target word; 0-based, the Pharaoh lines of the
chosen method, symmetrised where a reverse model was given) and, with gold links, ``aer_heads`` [L, H] and
``aer_layers`` [L] (float64). The sidecar ``FILE.json`` is what ``--json`` prints: the model, the set and how it was
read, every setting (for a decoder-only LLM: the attention read, the sentence's span of each prompt, the first
prompt, the prompt's languages and the reverse model prompted the other way) and the figures.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.engine.analysis.alignment import AlignmentReady
from attnviz.engine.checkpoints.store import atomic_write


def link_array(alignments: tuple[str, ...] | list[str]) -> np.ndarray:
    """Pharaoh lines ('i-j ...', one per sentence) as [K, 3] int32 rows (sentence, source word, target word)."""
    rows = [(n, *map(int, pair.split("-"))) for n, line in enumerate(alignments) for pair in line.split()]
    return np.asarray(rows, dtype=np.int32).reshape(-1, 3)


def alignment_arrays(result: AlignmentReady) -> dict[str, np.ndarray]:
    arrays = {"links": link_array(result.alignments)}
    if result.aer_heads is not None and result.aer_layers is not None:
        arrays.update(aer_heads=np.asarray(result.aer_heads, dtype=np.float64),
                      aer_layers=np.asarray(result.aer_layers, dtype=np.float64))
    return arrays


def save_alignment(path: str | Path, result: AlignmentReady, card: dict[str, Any]) -> Path:
    """Write ``path`` (.npz) and its sidecar (suffix .json: ``card`` and the result's JSON); returns the sidecar."""
    path = Path(path)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **alignment_arrays(result))  # type: ignore[arg-type]
    atomic_write(path, buffer.getvalue())
    arrays = {"arrays": {name: list(array.shape) for name, array in alignment_arrays(result).items()}}
    sidecar = path.with_suffix(".json")
    text = json.dumps({**card, **result.to_json(), **arrays}, indent=2, ensure_ascii=False, default=_plain)
    atomic_write(sidecar, text.encode("utf-8"))
    return sidecar


def _plain(value: Any) -> Any:
    """numpy scalars and arrays in the settings, as JSON has them."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-able")
