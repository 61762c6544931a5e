"""Export of an attribution or a logit lens: an NPZ of plain arrays (no pickle) and a JSON sidecar beside it with
the method, its settings, the tokens and the model's name, so that the file says how it was made.

The NPZ keys are the result's ``arrays()`` (``source`` [L', T, S], ``prefix`` [L', T, T], ``source_share``
[L', T], labels...; a lens' top tokens and probabilities); the sidecar is ``metadata()`` with the model and the
typed source text. The sidecar names the model (its card's name, else its file name), never the user's path.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.engine.attribution.base import Attribution
from attnviz.engine.attribution.logit_lens import LogitLens
from attnviz.engine.checkpoints.store import atomic_write
from attnviz.engine.export import model_name

LAYOUT = {"attribution": "source is [L', T, S] and prefix [L', T, T]: rows are output tokens, columns source tokens "
                         "or decoder inputs (<sos>, then the outputs before the last); L' = 1 without layers, else "
                         "index i is after layer i + 1",
          "logit-lens": "top_tokens and top_probs are [L, T, K], chosen_prob and chosen_rank [L, T]: index i of "
                        "the first axis is decoder layer i + 1"}


def sidecar(result: Attribution | LogitLens, model_info: dict[str, Any], source_text: str | None) -> dict[str, Any]:
    """What the JSON beside the arrays says (also what ``attnviz attribute --json`` starts from)."""
    layout = LAYOUT["logit-lens" if isinstance(result, LogitLens) else "attribution"]
    return {"model": {"name": model_name(model_info),
                      **{k: model_info.get(k) for k in ("languages", "src_lang", "tgt_lang")}},
            "source_text": source_text, "layout": layout, **result.metadata()}


def save_attribution(path: str | os.PathLike, result: Attribution | LogitLens, model_info: dict[str, Any],
                     source_text: str | None = None) -> Path:
    """Write ``path`` (.npz) and ``path`` with suffix .json; returns the sidecar's path."""
    path = Path(path)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **result.arrays())  # type: ignore[arg-type]  # numpy's stub lets ** keys reach allow_pickle
    atomic_write(path, buffer.getvalue())
    json_path = path.with_suffix(".json")
    text = json.dumps(sidecar(result, model_info, source_text), indent=2, ensure_ascii=False)
    atomic_write(json_path, text.encode("utf-8"))
    return json_path
