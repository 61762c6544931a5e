"""Loading a MarianMT folder's weights into attnviz's Transformer (kind ``marian``): the torch half of the format
that ``engine.hub.marian`` registers, imported only when a folder is loaded.

Weights are read through ``engine.checkpoints.weights`` (safetensors, or a ``.bin`` with
``torch.load(weights_only=True)``: nothing is ever unpickled; names, shapes and values checked against the folder's
plan, ``engine.hub.marian.weight_plan``) and built at the dtype asked (``engine.checkpoints.assign``). Weight names
follow Hugging Face's ``MarianMTModel``; every row indexed by a token is reordered from Marian's ids into attnviz's
(``engine.hub.marian_files.attnviz_vocab``). Positions are computed, not read: the stored sinusoid tables are the
same function.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from attnviz.engine.checkpoints.assign import build_loaded
from attnviz.engine.checkpoints.mapped import reordered_rows
from attnviz.engine.checkpoints.weights import read_weights
from attnviz.engine.hub.marian_files import (
    ATTENTION,
    EMBEDDINGS,
    LAYER_PARTS,
    MarianParts,
    folder_parts,
    weight_plan,
    weights_file,
)
from attnviz.engine.translator import Translator

_OURS = {  # Marian's part name -> attnviz's, inside one layer
    "encoder": {"self_attn": "self_attn", "self_attn_layer_norm": "res_attn.norm", "fc1": "ff.0", "fc2": "ff.3",
                "final_layer_norm": "res_ff.norm"},
    "decoder": {"self_attn": "self_attn", "self_attn_layer_norm": "res_self.norm", "encoder_attn": "cross_attn",
                "encoder_attn_layer_norm": "res_cross.norm", "fc1": "ff.0", "fc2": "ff.3",
                "final_layer_norm": "res_ff.norm"},
}


def layer_state(weights: dict[str, Tensor], side: str, index: int) -> dict[str, Tensor]:
    state = {}
    for theirs in LAYER_PARTS[side]:
        subs = [f".{p}" for p in ATTENTION] if theirs.endswith("attn") else [""]
        for sub in subs:
            for param in ("weight", "bias"):
                state[f"{side}.{index}.{_OURS[side][theirs]}{sub}.{param}"] = weights[
                    f"model.{side}.layers.{index}.{theirs}{sub}.{param}"]
    return state


def marian_state(weights: dict[str, Tensor], parts: MarianParts) -> dict[str, Tensor]:
    """attnviz's state dict (as ``stored_state`` writes it) from Marian's weights, already checked against the
    folder's plan (``weight_plan``): every name read here is there with its shape. A shared or tied embedding is
    reordered once, and the one tensor stands under each name that shares it."""
    cfg = parts.cfg
    src_rows, tgt_rows = torch.tensor(parts.src_order), torch.tensor(parts.tgt_order)
    embeddings = [weights[n] for n in EMBEDDINGS if n in weights]  # shared: model.shared first, else a side's copy
    src_embed = embeddings[0] if cfg.share_embeddings else weights[EMBEDDINGS[1]]
    tgt_embed = embeddings[0] if cfg.share_embeddings else weights[EMBEDDINGS[2]]
    src = reordered_rows(src_embed, src_rows)  # 119 MB for OPUS-MT's 58k x 512: reordered once, never held twice
    same = tgt_embed is src_embed and parts.tgt_order == parts.src_order
    tgt = src if same else reordered_rows(tgt_embed, tgt_rows)
    out = tgt if cfg.tie_output else reordered_rows(weights["lm_head.weight"], tgt_rows)
    bias = weights.get("final_logits_bias", torch.zeros(1, out.size(0)))
    state = {"src_embed.tokens.weight": src, "tgt_embed.tokens.weight": tgt, "out_proj.weight": out,
             "out_proj.bias": bias[0].index_select(0, tgt_rows)}
    for side, layers in (("encoder", cfg.enc_layers), ("decoder", cfg.dec_layers)):
        for i in range(layers):
            state |= layer_state(weights, side, i)
    return state


def load_marian(folder: str | Path, dtype: str = "float32") -> Translator:
    """A ready ``Translator`` for a Marian folder at ``dtype`` (CheckpointError with a clear message for anything
    else)."""
    folder = Path(folder)
    parts = folder_parts(folder)
    weights = read_weights(weight_plan(parts, weights_file(folder)), (*EMBEDDINGS, "lm_head.weight"))
    model = build_loaded(folder, parts.cfg, marian_state(weights, parts), dtype)
    meta = {"name": folder.resolve().name, "path": str(folder), "imported_from": "MarianMT folder",
            "generation": parts.generation}
    return Translator(model, parts.src_vocab, parts.tgt_vocab, parts.src_spec, parts.tgt_spec, meta)
