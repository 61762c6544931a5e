"""A GGUF file's metadata as the ``config.json`` a Hugging Face folder of the same model holds, and its tensor names
as that folder's, so the LLM folder's own reader (``engine.hub.llm_config``) and network take it from there.

Architectures: ``llama`` (Llama, and Mistral, which llama.cpp writes as ``llama``), ``qwen2``, ``qwen3``, ``gemma2``
and ``gemma3``; others are refused by name. Where the file is silent, the family's defaults are the ones
transformers' config classes hold (Gemma 2's soft-caps 50 and 30, Gemma 3's local RoPE base 10,000 and its
five-sliding-one-full layer pattern), and the query scale is llama.cpp's (the head width, but the hidden width over
the heads for Gemma 2 27B and Gemma 3 27B, the two sizes llama.cpp treats so).

What llama.cpp's converter changes is undone as transformers' GGUF loader undoes it (``undo``): the Llama family's
query and key rows are permuted back from llama.cpp's RoPE layout, and Gemma's norm weights, stored with 1 added,
have it taken off.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub.gguf_format import AGAIN_GGUF, GGUFFile

ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma2": "gemma2", "gemma3": "gemma3_text"}
GEMMA = ("gemma2", "gemma3")
# block counts of the sizes whose query scale llama.cpp takes as hidden / heads (Gemma 2 27B, Gemma 3 27B)
WIDE_SCALE = {"gemma2": 46, "gemma3": 62}
GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                "output.weight": "lm_head.weight"}
LAYER_NAMES = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
               "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
               "attn_k_norm": "self_attn.k_norm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
               "ffn_down": "mlp.down_proj"}
LLAMA_NORMS = {"ffn_norm": "post_attention_layernorm"}
GEMMA_NORMS = {"post_attention_norm": "post_attention_layernorm", "ffn_norm": "pre_feedforward_layernorm",
               "post_ffw_norm": "post_feedforward_layernorm"}


def architecture(found: GGUFFile) -> str:
    """The file's ``general.architecture``, one attnviz reads (CheckpointError naming it otherwise)."""
    arch = found.metadata.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise CheckpointError(f"{found.path} holds a {arch!r:.40} model (GGUF general.architecture); attnviz opens "
                              f"the decoder-only architectures {', '.join(ARCHITECTURES)}.")
    return str(arch)


def _query_scale(arch: str, get: Any, head_dim: int, hidden: int, heads: int) -> float:
    if get("block_count") == WIDE_SCALE[arch]:
        return hidden / heads
    return float(head_dim)


def hf_config(found: GGUFFile) -> dict[str, Any]:
    """The ``config.json`` of the folder this file was converted from, as far as its metadata says."""
    arch, meta = architecture(found), found.metadata
    get = lambda key, default=None: meta.get(f"{arch}.{key}", default)  # noqa: E731
    if "rope_freqs.weight" in found.tensors:
        raise CheckpointError(f"{found.path} scales RoPE by stored frequency factors (rope_freqs.weight, Llama 3.1 "
                              "and later), which attnviz does not read from GGUF yet; open the model's Hugging "
                              "Face folder instead.")
    hidden, heads = get("embedding_length"), get("attention.head_count")
    tokens = meta.get("tokenizer.ggml.tokens")
    config: dict[str, Any] = {
        "model_type": ARCHITECTURES[arch], "hidden_size": hidden, "num_hidden_layers": get("block_count"),
        "intermediate_size": get("feed_forward_length"), "num_attention_heads": heads,
        "num_key_value_heads": get("attention.head_count_kv", heads),
        "max_position_embeddings": get("context_length", 2048),
        "rms_norm_eps": get("attention.layer_norm_rms_epsilon", 1e-6), "rope_theta": get("rope.freq_base", 10000.0),
        "vocab_size": get("vocab_size", len(tokens) if isinstance(tokens, list) else None),
        "tie_word_embeddings": "output.weight" not in found.tensors,
        "hidden_act": "gelu_pytorch_tanh" if arch in GEMMA else "silu",
        **{name: meta.get(f"tokenizer.ggml.{key}") for name, key in (
            ("bos_token_id", "bos_token_id"), ("eos_token_id", "eos_token_id"), ("pad_token_id", "padding_token_id"))}}
    if isinstance(heads, int) and isinstance(hidden, int) and heads > 0:
        config["head_dim"] = get("attention.key_length", get("rope.dimension_count", hidden // heads))
    scaling = get("rope.scaling.type")
    if scaling not in (None, "none"):
        config["rope_scaling"] = {"rope_type": scaling, "factor": get("rope.scaling.factor", 1.0)}
        if get("rope.scaling.original_context_length") is not None:
            config["rope_scaling"]["original_max_position_embeddings"] = get("rope.scaling.original_context_length")
    if arch == "gemma2":
        config |= {"attn_logit_softcapping": get("attn_logit_softcapping", 50.0),
                   "final_logit_softcapping": get("final_logit_softcapping", 30.0),
                   "sliding_window": get("attention.sliding_window", 4096)}
    if arch == "gemma3":
        config |= {"sliding_window": get("attention.sliding_window", 4096), "rope_local_base_freq": 10000.0,
                   "final_logit_softcapping": get("final_logit_softcapping")}
        pattern = get("attention.sliding_window_pattern")
        if isinstance(pattern, np.ndarray):  # one flag a layer: whether it slides
            config["layer_types"] = ["sliding_attention" if bool(f) else "full_attention" for f in pattern]
        elif pattern is not None:
            config["sliding_window_pattern"] = pattern
    if arch in GEMMA and isinstance(config.get("head_dim"), int) and isinstance(hidden, int) and isinstance(heads, int):
        config["query_pre_attn_scalar"] = _query_scale(arch, get, config["head_dim"], hidden, heads)
    return config


def hf_names(found: GGUFFile) -> dict[str, str]:
    """Each tensor's name in the folder (GGUF name -> Hugging Face name); CheckpointError for one attnviz would
    not read, so nothing the file holds is dropped in silence."""
    norms = GEMMA_NORMS if architecture(found) in GEMMA else LLAMA_NORMS
    names = {}
    for name in found.tensors:
        if name in GLOBAL_NAMES:
            names[name] = GLOBAL_NAMES[name]
            continue
        parts = name.split(".")
        part = LAYER_NAMES.get(parts[2], norms.get(parts[2])) if len(parts) == 4 and parts[0] == "blk" else None
        if part is None or not parts[1].isdigit() or parts[3] not in ("weight", "bias"):
            raise CheckpointError(f"{found.path} holds the tensor {name!r:.60}, which no {architecture(found)} layer "
                                  f"attnviz builds has; {AGAIN_GGUF}.")
        names[name] = f"model.layers.{int(parts[1])}.{part}.{parts[3]}"
    return names


def row_order(arch: str, name: str, rows: int, heads: int, kv_heads: int) -> np.ndarray | None:
    """Where each row of the folder's tensor comes from in the file's (``out[i] = stored[order[i]]``): the Llama
    family's query and key rows, which llama.cpp regroups for its RoPE layout; None for a tensor kept in order."""
    if arch != "llama" or not (".attn_q." in name or ".attn_k." in name):
        return None
    n = heads if ".attn_q." in name else kv_heads
    return np.arange(rows).reshape(n, rows // n // 2, 2).swapaxes(1, 2).reshape(-1)


def value_offset(arch: str, name: str) -> float:
    """What llama.cpp added to a tensor's values, to be taken off: 1 for Gemma's norm weights, else 0."""
    return 1.0 if arch in GEMMA and name.endswith("norm.weight") else 0.0
