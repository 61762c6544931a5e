"""Loading a MarianMT folder's weights into attnviz's Transformer (kind ``marian``): the torch half of the format
that ``engine.hub.marian`` registers, imported only when a folder is loaded.

Weights are read through ``engine.checkpoints.weights`` (safetensors, or a ``.bin`` with
``torch.load(weights_only=True)``: nothing is ever unpickled; names, shapes and values checked against the folder's
plan, ``engine.hub.marian.weight_plan``). float16 and bfloat16 weights load as float32. Weight names follow Hugging
Face's ``MarianMTModel``; every row indexed by a token is reordered from Marian's ids into attnviz's
(``engine.hub.marian_files.attnviz_vocab``). Positions are computed, not read: the stored sinusoid tables are the
same function.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from attnviz.engine.checkpoints.weights import read_weights
from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub.marian_files import (
    ATTENTION,
    EMBEDDINGS,
    LAYER_PARTS,
    MarianParts,
    folder_parts,
    weight_plan,
    weights_file,
)
from attnviz.engine.models.protocol import IncrementalModel, load_stored_state, stored_state
from attnviz.engine.translator import Translator, build_model

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
    folder's plan (``weight_plan``): every name read here is there with its shape."""
    cfg = parts.cfg
    src_rows, tgt_rows = torch.tensor(parts.src_order), torch.tensor(parts.tgt_order)
    embeddings = [weights[n] for n in EMBEDDINGS if n in weights]  # shared: model.shared first, else a side's copy
    src_embed = embeddings[0] if cfg.share_embeddings else weights[EMBEDDINGS[1]]
    tgt_embed = embeddings[0] if cfg.share_embeddings else weights[EMBEDDINGS[2]]
    out = tgt_embed if cfg.tie_output else weights["lm_head.weight"]
    bias = weights.get("final_logits_bias", torch.zeros(1, out.size(0)))
    state = {"src_embed.tokens.weight": src_embed[src_rows], "tgt_embed.tokens.weight": tgt_embed[tgt_rows],
             "out_proj.weight": out[tgt_rows], "out_proj.bias": bias[0][tgt_rows]}
    for side, layers in (("encoder", cfg.enc_layers), ("decoder", cfg.dec_layers)):
        for i in range(layers):
            state |= layer_state(weights, side, i)
    return state


def model_from_state(folder: Path, cfg: ModelConfig, mapped: dict[str, Tensor]) -> IncrementalModel:
    """The network of ``cfg`` holding ``mapped`` (attnviz's names -> tensors, as a format's mapping gives them;
    tied copies are re-tied); a name or shape the model needs and the mapping lacks is a mapping fault, said
    plainly."""
    model = build_model(cfg)
    expected = {k: v.shape for k, v in stored_state(model).items()}
    state = {k: v for k, v in mapped.items() if k in expected}
    for name, shape in expected.items():  # the plan implies each
        if name not in state or state[name].shape != shape:
            got = list(state[name].shape) if name in state else "nothing"
            raise CheckpointError(f"{folder}: {name} should have shape {list(shape)} by config.json but the weights "
                                  f"give {got}.")
    load_stored_state(model, state)
    return model


def load_marian(folder: str | Path) -> Translator:
    """A ready ``Translator`` for a Marian folder (CheckpointError with a clear message for anything else)."""
    folder = Path(folder)
    parts = folder_parts(folder)
    weights = read_weights(weight_plan(parts, weights_file(folder)))
    model = model_from_state(folder, parts.cfg, marian_state(weights, parts))
    meta = {"name": folder.resolve().name, "path": str(folder), "imported_from": "MarianMT folder"}
    return Translator(model, parts.src_vocab, parts.tgt_vocab, parts.src_spec, parts.tgt_spec, meta)
