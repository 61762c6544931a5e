"""Loading an M2M100 / NLLB-200 or mBART-50 folder's weights into attnviz's Transformer: the torch half of the
formats ``engine.hub.m2m100`` and ``engine.hub.mbart`` register, imported only when a folder is loaded.

Weights are read through ``engine.checkpoints.weights`` (safetensors, or a ``.bin`` with
``torch.load(weights_only=True)``: nothing is unpickled; names, shapes and values checked against the folder's
plan, ``engine.hub.fairseq_files.weight_plan``) and built at the dtype asked (``engine.checkpoints.assign``). The
mapping (``fairseq_state``) is a plain name -> tensor dictionary: every row indexed by a token is reordered from
fairseq's ids into attnviz's (the one shared table once), mBART's learned position rows lose fairseq's offset of 2,
and the final layer norms become the Transformer's ``enc_norm``/``dec_norm``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from attnviz.engine.checkpoints.assign import build_loaded
from attnviz.engine.checkpoints.mapped import reordered_rows
from attnviz.engine.checkpoints.weights import read_weights
from attnviz.engine.hub.fairseq_files import EMBEDDINGS, LEARNED_OFFSET, FairseqParts, folder_parts, weight_plan
from attnviz.engine.hub.marian_files import weights_file
from attnviz.engine.hub.marian_weights import layer_state
from attnviz.engine.translator import Translator


def _norm(weights: dict[str, Tensor], theirs: str, ours: str) -> dict[str, Tensor]:
    return {f"{ours}.{p}": weights[f"{theirs}.{p}"] for p in ("weight", "bias")}


def fairseq_state(weights: dict[str, Tensor], parts: FairseqParts) -> dict[str, Tensor]:
    """attnviz's state dict (as ``stored_state`` writes it) from the folder's weights, already checked against the
    plan (``weight_plan``): every name read here is there with its shape."""
    cfg, rows = parts.cfg, torch.tensor(parts.order)
    embed = next(weights[n] for n in EMBEDDINGS if n in weights)  # one table: model.shared, else a side's copy
    table = reordered_rows(embed, rows)  # 1 GB for NLLB-600M's 256k x 1024: reordered once, never held twice
    out = table if cfg.tie_output else reordered_rows(weights["lm_head.weight"], rows)
    bias = weights.get("final_logits_bias", torch.zeros(1, embed.size(0)))
    state = {"src_embed.tokens.weight": table, "tgt_embed.tokens.weight": table, "out_proj.weight": out,
             "out_proj.bias": bias[0].index_select(0, rows)}
    for side, ours, layers in (("encoder", "src", cfg.enc_layers), ("decoder", "tgt", cfg.dec_layers)):
        for i in range(layers):
            state |= layer_state(weights, side, i)
        state |= _norm(weights, f"model.{side}.layer_norm", f"{side[:3]}_norm")
        if cfg.embed_norm:
            state |= _norm(weights, f"model.{side}.layernorm_embedding", f"{ours}_embed.norm")
        if cfg.positions == "learned":
            state[f"{ours}_embed.positions.weight"] = weights[f"model.{side}.embed_positions.weight"][LEARNED_OFFSET:]
    return state


def load_fairseq(folder: str | Path, model_type: str, dtype: str = "float32") -> Translator:
    """A ready ``Translator`` for a folder of ``model_type`` at ``dtype`` (CheckpointError with a clear message
    otherwise)."""
    folder = Path(folder)
    parts = folder_parts(folder, model_type)
    weights = read_weights(weight_plan(parts, weights_file(folder)), (*EMBEDDINGS, "lm_head.weight"))
    model = build_loaded(folder, parts.cfg, fairseq_state(weights, parts), dtype)
    meta = parts.metadata() | {"path": str(folder)}
    spec = parts.spec
    return Translator(model, parts.vocab, parts.vocab, spec, spec, meta)
