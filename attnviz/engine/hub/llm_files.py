"""Reading a decoder-only LLM folder's files, as the Hugging Face Hub lays them out, without torch.

A folder holds ``config.json`` (``engine.hub.llm_config``), ``generation_config.json`` (the end tokens, the
decoding), ``tokenizer.json`` (read by the ``tokenizers`` library: ``engine.hub.llm_tokens``),
``tokenizer_config.json`` (the chat template, unless ``chat_template.jinja`` holds it) and its weights:
``model.safetensors``, or shards ``model-0000N-of-0000M.safetensors`` listed by ``model.safetensors.index.json``,
read as one. The weight plan names every tensor under the folder's own names (attnviz's network uses them too).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnviz.engine.checkpoints.folder import AGAIN, WeightPlan, check_number, read_bytes, read_object
from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub.families import holds
from attnviz.engine.hub.generation import read_generation
from attnviz.engine.hub.llm_config import MODEL_TYPES, model_config, refusal, unchecked
from attnviz.engine.hub.parsed import once
from attnviz.engine.models.llm_arch import LLMArch

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"
MAX_TEMPLATE_BYTES = 256 * 1024  # real chat templates are a few KB
# An answer's length when the folder's generation config names no max_new_tokens: one sentence's translation needs
# far fewer, and 256 kept a model that never chose its end token decoding for minutes (said in the notes)
DEFAULT_NEW_TOKENS = 128
HF_TOP_K = 50  # transformers samples from the 50 most probable tokens when the generation config names no top_k


@dataclass(frozen=True)
class LLMFolder:
    """What a folder's files say, checked: the config, the weight plan(s), the chat template and the decoding."""

    cfg: ModelConfig
    plans: tuple[WeightPlan, ...]  # one per weights file
    template: str | None  # the chat template's source, None for a base model without one
    generation: dict[str, Any]
    model_type: str
    unchecked: tuple[str, ...]  # what the weights' shapes cannot confirm of config.json, in words

    @property
    def arch(self) -> LLMArch:
        return LLMArch.from_dict(self.cfg.arch)


def read_config(folder: Path) -> dict[str, Any]:
    """``config.json``, checked to be a family attnviz opens (CheckpointError naming the family otherwise)."""
    config = read_object(folder / "config.json")
    kind = config.get("model_type")
    if kind not in MODEL_TYPES:
        why = refusal(kind) or holds(kind, config.get("architectures"))
        raise CheckpointError(f"{folder} {why}, which attnviz cannot open as a decoder-only LLM.")
    return config


def _end_ids(folder: Path, config: dict[str, Any]) -> Any:
    path = folder / "generation_config.json"
    generation = read_object(path) if path.exists() else {}
    found = generation.get("eos_token_id")
    return config.get("eos_token_id") if found is None else found


def weight_names(cfg: ModelConfig) -> dict[str, list[int]]:
    """Every tensor ``cfg``'s network reads, under the folder's names, with its shape."""
    arch, d = LLMArch.from_dict(cfg.arch), cfg.d_model
    q, kv = cfg.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    names: dict[str, list[int]] = {"model.embed_tokens.weight": [arch.vocab, d], "model.norm.weight": [d]}
    for i in range(cfg.dec_layers):
        layer = f"model.layers.{i}."
        names |= {layer + "self_attn.q_proj.weight": [q, d], layer + "self_attn.k_proj.weight": [kv, d],
                  layer + "self_attn.v_proj.weight": [kv, d], layer + "self_attn.o_proj.weight": [d, q],
                  layer + "mlp.gate_proj.weight": [cfg.ff_dim, d], layer + "mlp.up_proj.weight": [cfg.ff_dim, d],
                  layer + "mlp.down_proj.weight": [d, cfg.ff_dim], layer + "input_layernorm.weight": [d],
                  layer + "post_attention_layernorm.weight": [d]}
        if arch.qkv_bias:
            names |= {layer + f"self_attn.{p}_proj.bias": [n] for p, n in (("q", q), ("k", kv), ("v", kv))}
        if arch.out_bias:
            names[layer + "self_attn.o_proj.bias"] = [d]
        if arch.mlp_bias:
            names |= {layer + f"mlp.{p}_proj.bias": [cfg.ff_dim] for p in ("gate", "up")}
            names[layer + "mlp.down_proj.bias"] = [d]
        if arch.qk_norm:
            names |= {layer + "self_attn.q_norm.weight": [arch.head_dim], layer + "self_attn.k_norm.weight":
                      [arch.head_dim]}
        if arch.family == "gemma":
            names |= {layer + f"{p}_feedforward_layernorm.weight": [d] for p in ("pre", "post")}
    if not cfg.tie_output:
        names["lm_head.weight"] = [arch.vocab, d]
    return names


def weight_plans(folder: Path, cfg: ModelConfig) -> tuple[WeightPlan, ...]:
    """One plan per weights file: ``model.safetensors``, or each shard with the tensors the index puts there."""
    names = weight_names(cfg)
    tied = {} if not cfg.tie_output else {"lm_head.weight": "tied to the embedding (tie_word_embeddings)"}
    if (folder / SINGLE).exists():
        return (WeightPlan(folder / SINGLE, names, unused=tied),)
    index_path = folder / INDEX
    if not index_path.exists():
        raise CheckpointError(f"{folder} has no weights: it needs {SINGLE}, or the shards its {INDEX} lists "
                              "(attnviz does not read pytorch_model.bin for LLMs); download the whole folder.")
    index = read_object(index_path)
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(f, str) for f in weight_map.values()):
        raise CheckpointError(f"{index_path}: field 'weight_map' must map each tensor name to a shard file; {AGAIN}.")
    missing = [n for n in names if n not in weight_map]
    if missing:
        raise CheckpointError(f"{index_path} does not list {missing[0]}, which config.json implies; {AGAIN}.")
    shards: dict[str, dict[str, list[int]]] = {}
    for name, file in weight_map.items():
        if Path(file).name != file or not file.endswith(".safetensors"):
            raise CheckpointError(f"{index_path}: shard {file!r:.60} is not a .safetensors file in the folder; "
                                  f"{AGAIN}.")
        shards.setdefault(file, {})
        if name in names:
            shards[file][name] = names[name]
    plans = []
    for file, wanted in shards.items():
        if not (folder / file).exists():
            raise CheckpointError(f"{folder} lacks the shard {file} that {INDEX} lists; download the whole folder.")
        others = {n: f"in another shard ({weight_map[n]})" for n in names if n not in wanted}
        plans.append(WeightPlan(folder / file, wanted, unused=others | tied))
    return tuple(plans)


def read_template(folder: Path) -> str | None:
    """The chat template's source: ``chat_template.jinja``, else ``tokenizer_config.json``'s ``chat_template`` (a
    string, or the one named "default" of a list); None when the folder has none."""
    path = folder / "chat_template.jinja"
    if path.exists():
        data = read_bytes(path, MAX_TEMPLATE_BYTES)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointError(f"{path} is not UTF-8 text; {AGAIN}.") from None
    path = folder / "tokenizer_config.json"
    if not path.exists():
        return None
    template = read_object(path).get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        if "default" not in named:  # transformers refuses such a list too: which template is meant is unsaid
            raise CheckpointError(f"{path}: field 'chat_template' lists templates ({', '.join(map(str, named))[:80]})"
                                  f" but none named \"default\"; name the one to use \"default\", or {AGAIN}.")
        template = named["default"]
    if template is None:
        return None
    if not isinstance(template, str) or len(template) > MAX_TEMPLATE_BYTES:
        raise CheckpointError(f"{path}: field 'chat_template' must be a template's text of at most "
                              f"{MAX_TEMPLATE_BYTES // 1024} KB; {AGAIN}.")
    return template


@once
def read_folder(folder: Path) -> LLMFolder:
    """Every file of an LLM folder but the weights' values, checked."""
    config = read_config(folder)
    cfg = model_config(folder / "config.json", config, _end_ids(folder, config))
    arch = LLMArch.from_dict(cfg.arch)
    order = [-1, arch.pad_id, -1, arch.end_ids[0] if arch.end_ids else -1, *range(arch.vocab)]
    generation = read_generation(folder, order, arch.vocab) or {}
    if generation:
        generation = replace_length(folder, generation)
    return LLMFolder(cfg, weight_plans(folder, cfg), read_template(folder), generation, str(config["model_type"]),
                     unchecked(config, cfg))


def replace_length(folder: Path, generation: dict[str, Any]) -> dict[str, Any]:
    """What differs for an LLM's generation config: ``max_length`` counts the prompt, so the answer's limit is
    ``max_new_tokens`` when given, else ``DEFAULT_NEW_TOKENS`` (said in the notes); ``do_sample`` samples at its
    ``temperature`` (attnviz's seed 0 unless asked) within its top-k / top-p cut-offs, top-k 50 when it names none
    (transformers' default)."""
    path = folder / "generation_config.json"
    settings = read_object(path) if path.exists() else {}
    new = settings.get("max_new_tokens")
    notes = [n for n in generation.get("notes", []) if not n.startswith("do_sample")]
    fields: dict[str, Any] = {}
    if not isinstance(new, int):
        new = DEFAULT_NEW_TOKENS
        notes.append(f"max_length counts the prompt; answers stop after {DEFAULT_NEW_TOKENS} tokens (--max-len)")
    if settings.get("do_sample") not in (None, True, False):
        raise CheckpointError(f"{path}: field 'do_sample' is {settings['do_sample']!r:.40}, but it must be true or "
                              f"false; {AGAIN}.")
    if settings.get("do_sample") is True:
        temperature = settings.get("temperature", 1.0)
        top_k, top_p = settings.get("top_k", HF_TOP_K), settings.get("top_p", 1.0)
        check_number(path, "temperature", temperature, 1e-3, 1000.0, whole=False)
        check_number(path, "top_k", HF_TOP_K if top_k is None else top_k, 0, 10**9)
        check_number(path, "top_p", 1.0 if top_p is None else top_p, 1e-6, 1.0, whole=False)
        fields |= {"temperature": float(temperature), "sample_top_k": HF_TOP_K if top_k is None else int(top_k),
                   "sample_top_p": 1.0 if top_p is None else float(top_p)}
    return generation | fields | {"max_len": new, "notes": notes}

