"""Loading a MarianMT folder's weights into attnviz's Transformer (kind ``marian``): the torch half of the format
that ``engine.hub.marian`` registers, imported only when a folder is loaded.

Weights are read with safetensors, or a ``.bin`` with ``torch.load(weights_only=True)``, which refuses anything but
tensors: nothing is ever unpickled. float16 and bfloat16 weights load as float32. Weight names follow Hugging
Face's ``MarianMTModel``; every row indexed by a token is reordered from Marian's ids into attnviz's
(``engine.hub.marian_files.attnviz_vocab``). Positions are computed, not read: the stored sinusoid tables are the
same function.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub.marian_files import WEIGHT_FILES, folder_parts, model_config
from attnviz.engine.models.protocol import load_stored_state, stored_state
from attnviz.engine.translator import Translator, build_model

_ATTENTION = ("q_proj", "k_proj", "v_proj", "out_proj")
_LAYER_PARTS = {  # attnviz name -> Marian name, inside one layer
    "encoder": {"self_attn": "self_attn", "res_attn.norm": "self_attn_layer_norm", "ff.0": "fc1", "ff.3": "fc2",
                "res_ff.norm": "final_layer_norm"},
    "decoder": {"self_attn": "self_attn", "res_self.norm": "self_attn_layer_norm", "cross_attn": "encoder_attn",
                "res_cross.norm": "encoder_attn_layer_norm", "ff.0": "fc1", "ff.3": "fc2",
                "res_ff.norm": "final_layer_norm"},
}


def read_weights(folder: Path) -> dict[str, Tensor]:
    """The folder's tensors as float32; a ``.bin`` only through ``torch.load(weights_only=True)``."""
    path = next((folder / name for name in WEIGHT_FILES if (folder / name).is_file()), None)
    if path is None:
        raise CheckpointError(f"{folder} has no weights: it needs model.safetensors or pytorch_model.bin.")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            weights = load_file(str(path))
        else:  # weights_only refuses every pickled object but tensors and plain containers: no code runs
            weights = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # safetensors and torch raise their own types for damaged or unsafe files
        raise CheckpointError(f"{path} cannot be read safely ({type(exc).__name__}: {exc}).") from None
    if not isinstance(weights, dict) or not all(isinstance(v, Tensor) for v in weights.values()):
        raise CheckpointError(f"{path} does not hold a flat dictionary of tensors.")
    return {k.removeprefix("module."): (v.float() if v.is_floating_point() else v) for k, v in weights.items()}


def _pick(weights: dict[str, Tensor], *names: str) -> Tensor:
    for name in names:
        if name in weights:
            return weights[name]
    raise CheckpointError(f"the weights lack {names[0]} (a Marian model has it).")


def _layer_state(weights: dict[str, Tensor], side: str, index: int) -> dict[str, Tensor]:
    state = {}
    for ours, theirs in _LAYER_PARTS[side].items():
        subs = [f".{p}" for p in _ATTENTION] if ours.endswith("attn") else [""]
        for sub in subs:
            for param in ("weight", "bias"):
                state[f"{side}.{index}.{ours}{sub}.{param}"] = _pick(
                    weights, f"model.{side}.layers.{index}.{theirs}{sub}.{param}")
    return state


def marian_state(weights: dict[str, Tensor], cfg, src_order: list[int], tgt_order: list[int]) -> dict[str, Tensor]:
    """attnviz's state dict (as ``stored_state`` writes it) from Marian's weights."""
    src_rows, tgt_rows = torch.tensor(src_order), torch.tensor(tgt_order)
    src_embed = _pick(weights, "model.encoder.embed_tokens.weight", "model.shared.weight")
    tgt_embed = _pick(weights, "model.decoder.embed_tokens.weight", "model.shared.weight")
    out = weights.get("lm_head.weight", tgt_embed)
    bias = weights.get("final_logits_bias", torch.zeros(1, out.size(0)))
    for name, tensor, rows in (("source embedding", src_embed, src_order), ("target embedding", tgt_embed, tgt_order),
                               ("output projection", out, tgt_order), ("final_logits_bias", bias.T, tgt_order)):
        if tensor.size(0) <= max(rows) or tensor.dim() != 2 or tensor.size(-1) not in (cfg.d_model, 1):
            raise CheckpointError(f"the {name} has shape {list(tensor.shape)}, which does not fit the vocabulary "
                                  f"({max(rows) + 1} ids) and d_model {cfg.d_model} of config.json.")
    state = {"src_embed.tokens.weight": src_embed[src_rows], "tgt_embed.tokens.weight": tgt_embed[tgt_rows],
             "out_proj.weight": out[tgt_rows], "out_proj.bias": bias[0][tgt_rows]}
    for side, layers in (("encoder", cfg.enc_layers), ("decoder", cfg.dec_layers)):
        for i in range(layers):
            state |= _layer_state(weights, side, i)
    return state


def load_marian(folder: str | Path) -> Translator:
    """A ready ``Translator`` for a Marian folder (CheckpointError with a clear message for anything else)."""
    folder = Path(folder)
    config, src_vocab, src_order, tgt_vocab, tgt_order, src_spec, tgt_spec = folder_parts(folder)
    weights = read_weights(folder)
    shared = bool(config.get("share_encoder_decoder_embeddings", True)) and src_order == tgt_order
    if "lm_head.weight" in weights and "model.decoder.embed_tokens.weight" in weights:
        tied = torch.equal(weights["lm_head.weight"], weights["model.decoder.embed_tokens.weight"])
    else:
        tied = "lm_head.weight" not in weights
    cfg = model_config(config, len(src_vocab), len(tgt_vocab), shared, tied)
    state = marian_state(weights, cfg, src_order, tgt_order)
    model = build_model(cfg)
    expected = {k: v.shape for k, v in stored_state(model).items()}
    state = {k: v for k, v in state.items() if k in expected}  # tied copies are re-tied by the network
    for name, shape in expected.items():
        if name not in state or state[name].shape != shape:
            got = list(state[name].shape) if name in state else "nothing"
            raise CheckpointError(f"{folder}: {name} should have shape {list(shape)} by config.json but the weights "
                                  f"give {got}.")
    load_stored_state(model, state)
    meta = {"name": folder.resolve().name, "path": str(folder), "imported_from": "MarianMT folder"}
    return Translator(model, src_vocab, tgt_vocab, src_spec, tgt_spec, meta)
