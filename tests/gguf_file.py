"""GGUF files written for the tests with ``gguf.GGUFWriter``, as llama.cpp's converter writes them from a Hugging
Face folder (``tests.llm_folder.make_llm_folder``): the metadata under llama.cpp's keys, the byte-level BPE
tokenizer (tokens, merges, types) or a SentencePiece-style one, the chat template, and the tensors under llama.cpp's
names with its changes (the Llama family's query and key rows regrouped for its RoPE layout, Gemma's norm weights
stored with 1 added), each at a chosen quantisation type.

K-quant types cannot be quantized by ``gguf`` (it only dequantizes them): their blocks are random bytes with sane
scales, which is all a reader must read right.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ARCH = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma2": "gemma2", "gemma3_text": "gemma3"}
# HF part -> llama.cpp's
LAYER = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
         "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
         "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down"}
LLAMA_NORMS = {"post_attention_layernorm": "ffn_norm"}
GEMMA_NORMS = {"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
               "post_feedforward_layernorm": "post_ffw_norm"}
GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
          "lm_head.weight": "output.weight"}
K_TYPES = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")


def gguf_name(hf: str, gemma: bool) -> str:
    if hf in GLOBAL:
        return GLOBAL[hf]
    _, _, layer, *rest = hf.split(".")
    part, kind = ".".join(rest[:-1]), rest[-1]
    return f"blk.{layer}.{LAYER.get(part) or (GEMMA_NORMS if gemma else LLAMA_NORMS)[part]}.{kind}"


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's regrouping of query / key rows (``LlamaModel.permute``)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


SCALES_AT = {"Q2_K": -4, "Q3_K": -2, "Q4_K": 0, "Q5_K": 0, "Q6_K": -2}  # where a block's half-precision scales lie


def random_blocks(qtype, rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """Random K-quant blocks whose half-precision scales (d, and dmin where the type has it) are small and finite."""
    from gguf import GGML_QUANT_SIZES

    block, size = GGML_QUANT_SIZES[qtype]
    data = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
    at = SCALES_AT[qtype.name]
    count = 2 if at in (0, -4) else 1
    scales = rng.uniform(0.001, 0.02, size=(rows, cols // block, count)).astype(np.float16).view(np.uint8)
    data[..., at:at + 2 * count or None] = scales
    return data.reshape(rows, -1)


def add(writer, name: str, values: np.ndarray, type_name: str, rng: np.random.Generator) -> None:
    """``values`` (float32) as ``type_name``; 1-D tensors and norms stay F32, as llama.cpp keeps them, and a matrix
    whose rows the type's blocks do not divide falls back to F16, as llama.cpp falls back."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import quantize

    qtype = GGMLQuantizationType[type_name]
    if values.ndim > 1 and values.shape[-1] % GGML_QUANT_SIZES[qtype][0]:
        type_name = "F16"
    if values.ndim == 1 or type_name == "F32":
        writer.add_tensor(name, values.astype(np.float32))
    elif type_name in K_TYPES:
        writer.add_tensor(name, random_blocks(qtype, *values.shape, rng), raw_dtype=qtype)
    elif type_name == "F16":
        writer.add_tensor(name, values.astype(np.float16))
    else:
        writer.add_tensor(name, quantize(values, qtype), raw_dtype=qtype)


def _metadata(writer, config: dict, arch: str) -> None:
    heads, hidden = config["num_attention_heads"], config["hidden_size"]
    head_dim = config.get("head_dim") or hidden // heads
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(config.get("num_key_value_heads") or heads)
    writer.add_layer_norm_rms_eps(config.get("rms_norm_eps", 1e-6))
    rope = config.get("rope_parameters") or {}
    rope = rope.get("full_attention", rope)  # Gemma 3's: one per layer type; GGUF holds the full layers' base
    writer.add_rope_freq_base(float(config.get("rope_theta") or rope.get("rope_theta", 10000.0)))
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    if arch == "llama":
        writer.add_rope_dimension_count(head_dim)
    if arch.startswith("gemma"):
        writer.add_sliding_window(config["sliding_window"])
    if arch == "gemma2":
        writer.add_attn_logit_softcapping(config["attn_logit_softcapping"])
        writer.add_final_logit_softcapping(config["final_logit_softcapping"])


def _tokenizer(writer, folder: Path) -> None:
    from gguf import TokenType

    data = json.loads((folder / "tokenizer.json").read_text())
    vocab = sorted(data["model"]["vocab"].items(), key=lambda item: item[1])
    added = {t["content"]: t["id"] for t in data.get("added_tokens", [])}
    tokens = [t for t, _ in vocab]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([TokenType.CONTROL if t in added else TokenType.NORMAL for t in tokens])
    merges = data["model"]["merges"]
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    config = json.loads((folder / "config.json").read_text())
    tok_config = json.loads((folder / "tokenizer_config.json").read_text())
    ends = config.get("eos_token_id")
    writer.add_eos_token_id(ends[0] if isinstance(ends, list) else ends)
    if isinstance(ends, list) and len(ends) > 1:
        writer.add_eot_token_id(ends[1])
    if isinstance(ends, list) and len(ends) > 2:
        writer.add_eom_token_id(ends[2])
    if config.get("bos_token_id") is not None:
        writer.add_bos_token_id(config["bos_token_id"])
    if config.get("pad_token_id") is not None:
        writer.add_pad_token_id(config["pad_token_id"])
    writer.add_add_bos_token(config.get("bos_token_id") is not None)
    if tok_config.get("chat_template"):
        writer.add_chat_template(tok_config["chat_template"])


def write_gguf(folder: Path, out: Path, types: str | dict[str, str] = "F32", seed: int = 0) -> Path:
    """The LLM ``folder`` as the GGUF file ``out``; ``types``: one quantisation type for every matrix, or one per
    kind of tensor ("embed", "attn", "ffn", "output") with "F32" for the rest."""
    from gguf import GGUFWriter
    from safetensors.numpy import load_file

    config = json.loads((folder / "config.json").read_text())
    arch = ARCH[config["model_type"]]
    gemma = arch.startswith("gemma")
    rng = np.random.default_rng(seed)
    writer = GGUFWriter(str(out), arch)
    writer.add_name(folder.name)
    _metadata(writer, config, arch)
    _tokenizer(writer, folder)
    heads, kv = config["num_attention_heads"], config.get("num_key_value_heads") or config["num_attention_heads"]
    for name, values in load_file(folder / "model.safetensors").items():
        values = values.astype(np.float32)
        target = gguf_name(name, gemma)
        if arch == "llama" and ".attn_q." in target:
            values = permute(values, heads)
        if arch == "llama" and ".attn_k." in target:
            values = permute(values, kv)
        if gemma and target.endswith("norm.weight"):
            values = values + 1
        part = ("embed" if "token_embd" in target else "output" if target == "output.weight" else
                "ffn" if ".ffn_" in target else "attn")
        add(writer, target, values, types if isinstance(types, str) else types.get(part, "F32"), rng)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def write_sentencepiece_gguf(out: Path, lines: list[str], add_space_prefix: bool = True) -> Path:
    """A GGUF file holding only a tokenizer of ``tokenizer.ggml.model`` ``llama`` (what llama.cpp writes for a
    SentencePiece model: pieces, scores, types, byte-fallback pieces as BYTE), trained here on ``lines``, under a
    one-layer Llama's metadata."""
    import io

    import sentencepiece as spm
    from gguf import GGUFWriter, TokenType

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=300,
                                   model_type="bpe", byte_fallback=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                                   minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    types = [TokenType.UNKNOWN if sp.is_unknown(i) else TokenType.CONTROL if sp.is_control(i) else
             TokenType.BYTE if sp.is_byte(i) else TokenType.NORMAL for i in range(len(pieces))]
    writer = GGUFWriter(str(out), "llama")
    for add, value in ((writer.add_block_count, 1), (writer.add_embedding_length, 32), (writer.add_head_count, 4),
                       (writer.add_feed_forward_length, 64), (writer.add_context_length, 256)):
        add(value)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(pieces)
    writer.add_token_scores([sp.get_score(i) for i in range(len(pieces))])
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_space_prefix(add_space_prefix)
    writer.add_tensor("token_embd.weight", np.zeros((len(pieces), 32), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
