"""A decoder-only LLM folder's ``config.json`` read into attnviz's ``ModelConfig`` (kind ``llm``) and its
``LLMArch``, without torch, through the shared folder checks (``engine.checkpoints.folder``).

Two architecture paths cover the families people translate with: *Llama-like* (``llama``, ``mistral``, ``qwen2``,
``qwen3``) and *Gemma-like* (``gemma2``, ``gemma3_text``). Both config layouts the Hub holds are read: transformers
4's ``rope_theta`` / ``rope_scaling`` / ``rope_local_base_freq`` / ``sliding_window_pattern`` and transformers 5's
``rope_parameters`` (per layer type for Gemma 3) and ``layer_types``. Anything attnviz does not compute (another
RoPE scaling, an activation outside SiLU and the tanh GELU, a fused projection) is refused by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnviz.engine.checkpoints.folder import AGAIN, check_fields, check_number
from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import CheckpointError, ConfigError
from attnviz.engine.kinds import check
from attnviz.engine.kinds.llm import LLM
from attnviz.engine.models.llm_arch import LAYER_TYPES, MAX_VOCAB, ROPE_TYPES, LLMArch

LLAMA_LIKE = ("llama", "mistral", "qwen2", "qwen3")
GEMMA_LIKE = ("gemma2", "gemma3_text")
MODEL_TYPES = LLAMA_LIKE + GEMMA_LIKE
# families people meet beside these, named in the refusal (what makes each another path)
OTHERS = {"cohere": "Cohere (parallel attention and feed-forward, LayerNorm)",
          "cohere2": "Cohere 2 (parallel attention and feed-forward)",
          "phi3": "Phi-3 (fused qkv and gate/up projections)", "phi": "Phi (partial rotary, LayerNorm)",
          "olmo": "OLMo (non-parametric LayerNorm)", "olmo2": "OLMo 2 (norms after the blocks)",
          "gemma3": "Gemma 3 multimodal (a vision tower beside the text model; open a text-only gemma3_text folder)",
          "gemma": "Gemma 1", "mixtral": "Mixtral (a mixture of experts)",
          "qwen2_moe": "Qwen2-MoE (a mixture of experts)", "qwen3_moe": "Qwen3-MoE (a mixture of experts)",
          "llama4": "Llama 4 (mixture of experts, multimodal)", "mistral3": "Mistral 3 (multimodal)",
          "hunyuan_v1_dense": "Hunyuan (its own attention layout)"}
ACTIVATIONS = {"silu": "swish", "swish": "swish", "gelu_pytorch_tanh": "gelu_new", "gelu_new": "gelu_new"}
MAX_POSITIONS = 16384  # the longest prompt + translation attnviz holds (MODEL_LIMITS); longer contexts are capped
FIELDS = {"d_model": "hidden_size", "dec_layers": "num_hidden_layers", "heads": "num_attention_heads",
          "ff_dim": "intermediate_size"}


def refusal(model_type: Any) -> str | None:
    """Why a folder of this ``model_type`` cannot be opened, when it is a decoder-only family attnviz knows of."""
    if model_type in OTHERS:
        return (f"holds a {OTHERS[model_type]} model (config.json model_type {model_type!r}), not one of the "
                f"Llama-like ({', '.join(LLAMA_LIKE)}) or Gemma-like ({', '.join(GEMMA_LIKE)}) decoder-only "
                "families")
    return None


def _get(config: dict[str, Any], name: str, default: Any) -> Any:
    value = config.get(name, default)
    return default if value is None else value


def _rope(path: Path, config: dict[str, Any], model_type: str) -> dict[str, Any]:
    """The RoPE fields of ``LLMArch`` from either config layout."""
    params = config.get("rope_parameters")
    for name in ("rope_parameters", "rope_scaling"):
        if config.get(name) is not None and not isinstance(config[name], dict):
            raise CheckpointError(f"{path}: field {name!r} is {config[name]!r:.40}, but it must be an object (its "
                                  f"RoPE settings) or null. Fix it, or {AGAIN}.")
    full: dict[str, Any] = {}
    local_theta = config.get("rope_local_base_freq")
    if isinstance(params, dict) and isinstance(params.get("full_attention"), dict):  # Gemma 3, transformers 5
        full = params["full_attention"]
        local = params.get("sliding_attention")
        local_theta = local.get("rope_theta") if isinstance(local, dict) else local_theta
    elif isinstance(params, dict):
        full = params
    else:
        scaling = config.get("rope_scaling")
        full = dict(scaling) if isinstance(scaling, dict) else {}
        full.setdefault("rope_theta", config.get("rope_theta", 10000.0))
    kind = full.get("rope_type", full.get("type", "default"))
    if kind not in ROPE_TYPES:
        raise CheckpointError(f"{path}: rope scaling type {kind!r:.40} is not one attnviz computes (it computes "
                              f"{', '.join(ROPE_TYPES)}); this folder cannot be opened.")
    theta = full.get("rope_theta", config.get("rope_theta", 10000.0))
    check_number(path, "rope_theta", theta, 1.0, 1e12, whole=False)
    fields: dict[str, Any] = {"rope_theta": float(theta or 0), "rope_type": kind}
    if local_theta is not None and model_type == "gemma3_text":
        check_number(path, "rope_local_base_freq", local_theta, 1.0, 1e12, whole=False)
        fields["rope_local_theta"] = float(local_theta)
    if kind != "default":
        factor = full.get("factor")
        check_number(path, "rope_scaling.factor", factor, 1e-3, 1e6, whole=False)
        fields["rope_factor"] = float(factor or 0)  # checked above
    if kind == "llama3":
        for ours, theirs in (("rope_low_freq", "low_freq_factor"), ("rope_high_freq", "high_freq_factor")):
            check_number(path, f"rope_scaling.{theirs}", full.get(theirs), 1e-6, 1e6, whole=False)
            fields[ours] = float(full[theirs])
        check_number(path, "rope_scaling.original_max_position_embeddings",
                     full.get("original_max_position_embeddings"), 1, 10_000_000)
        fields["rope_original_positions"] = full["original_max_position_embeddings"]
    return fields


def _layer_types(path: Path, config: dict[str, Any], model_type: str, layers: int) -> tuple[str, ...]:
    """Which layers slide, from ``layer_types`` or each family's older fields."""
    given = config.get("layer_types")
    if isinstance(given, list):
        if len(given) != layers or not all(t in LAYER_TYPES for t in given):
            raise CheckpointError(f"{path}: field 'layer_types' must name {layers} layers, each one of "
                                  f"{', '.join(LAYER_TYPES)}. Fix it, or {AGAIN}.")
        return tuple(given) if LAYER_TYPES[1] in given else ()  # no layer slides: none to tell apart
    if model_type == "gemma2":
        return tuple(LAYER_TYPES[1] if i % 2 == 0 else LAYER_TYPES[0] for i in range(layers))
    if model_type == "gemma3_text":
        pattern = _get(config, "sliding_window_pattern", 6)
        check_number(path, "sliding_window_pattern", pattern, 1, 10_000)
        return tuple(LAYER_TYPES[0] if (i + 1) % pattern == 0 else LAYER_TYPES[1] for i in range(layers))
    if model_type in ("qwen2", "qwen3") and config.get("use_sliding_window"):
        first = _get(config, "max_window_layers", layers)
        return tuple(LAYER_TYPES[1] if i >= first else LAYER_TYPES[0] for i in range(layers))
    return ()


def _window(path: Path, config: dict[str, Any], model_type: str) -> int:
    if model_type in ("qwen2", "qwen3") and not config.get("use_sliding_window") and "layer_types" not in config:
        return 0
    window = config.get("sliding_window")
    if window is None:
        return 0
    check_number(path, "sliding_window", window, 1, 100_000_000)
    return int(window)


def _ids(path: Path, value: Any, name: str, vocab: int) -> tuple[int, ...]:
    values = value if isinstance(value, list) else [] if value is None else [value]
    for one in values:
        if type(one) is not int or not 0 <= one < vocab:
            raise CheckpointError(f"{path}: field {name!r} holds {one!r:.40}, but it must be a token id from 0 to "
                                  f"{vocab - 1}. Fix it, or {AGAIN}.")
    return tuple(dict.fromkeys(values))


def _gemma(path: Path, config: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """The Gemma-like switches: the query scale and Gemma 2's softcaps."""
    scalar = _get(config, "query_pre_attn_scalar", head_dim)
    check_number(path, "query_pre_attn_scalar", scalar, 1e-6, 1e9, whole=False)
    found = {"query_scale": float(scalar)}
    for ours, theirs in (("attn_softcap", "attn_logit_softcapping"), ("final_softcap", "final_logit_softcapping")):
        cap = config.get(theirs)
        if cap is not None:
            check_number(path, theirs, cap, 1e-6, 1e9, whole=False)
            found[ours] = float(cap)
    return found


def unchecked(config: dict[str, Any], cfg: ModelConfig) -> tuple[str, ...]:
    """What the weights' shapes cannot confirm of an LLM's config.json, in words, for ``attnviz info``."""
    arch = LLMArch.from_dict(cfg.arch)
    found = [] if "head_dim" in config and config["head_dim"] is not None else [
        f"the number of attention heads ({cfg.heads} query, {arch.kv_heads} key/value; with no head_dim in "
        f"config.json the weights allow any count dividing the width)"]
    found += [f"the activation ({cfg.activation}, the family's; the weights cannot confirm it)",
              f"RoPE (base {arch.rope_theta:g}, {arch.rope_type}), the RMSNorm epsilon ({cfg.ln_eps:g}) and the "
              f"sliding window ({arch.sliding_window or 'none'}): numbers the weights cannot confirm"]
    return tuple(found)


def model_config(path: Path, config: dict[str, Any], end_ids: Any) -> ModelConfig:
    """The ``ModelConfig`` of a Llama- or Gemma-like ``config.json`` (read from ``path``), ending at ``end_ids``
    (the generation config's ``eos_token_id``, else the config's); CheckpointError naming the field otherwise."""
    model_type = str(config.get("model_type"))
    gemma = model_type in GEMMA_LIKE
    settings: dict[str, Any] = {ours: config.get(theirs) for ours, theirs in FIELDS.items()}
    check_fields(path, settings, FIELDS)
    for ours, theirs in FIELDS.items():
        check_number(path, theirs, settings[ours], 1, 1_000_000)
    vocab: int = config.get("vocab_size")  # type: ignore[assignment]  # checked on the next line
    check_number(path, "vocab_size", vocab, 1, MAX_VOCAB)
    heads = settings["heads"]
    kv_heads = _get(config, "num_key_value_heads", heads)
    check_number(path, "num_key_value_heads", kv_heads, 1, heads)
    head_dim = _get(config, "head_dim", settings["d_model"] // heads)
    check_number(path, "head_dim", head_dim, 2, 4096)
    positions = _get(config, "max_position_embeddings", 2048)
    check_number(path, "max_position_embeddings", positions, 3, 100_000_000)
    eps = _get(config, "rms_norm_eps", 1e-6)
    check_number(path, "rms_norm_eps", eps, 1e-12, 0.1, whole=False)
    act_name = config.get("hidden_activation") or config.get("hidden_act") or ("gelu_pytorch_tanh" if gemma else "silu")
    if ACTIVATIONS.get(act_name) != ("gelu_new" if gemma else "swish"):  # the weights cannot tell: the family can
        family = ("Gemma-like models gate with the tanh GELU (gelu_pytorch_tanh)" if gemma else
                  "Llama-like models gate with SiLU (silu)")
        raise CheckpointError(f"{path}: field 'hidden_act' is {act_name!r:.40}, but {family}; the weights cannot "
                              f"tell which is right, and the wrong one translates badly without a word. Fix it, or "
                              f"{AGAIN}.")
    flags = {name: config.get(name, False) for name in ("attention_bias", "mlp_bias", "tie_word_embeddings")}
    flags["tie_word_embeddings"] = config.get("tie_word_embeddings", gemma)
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise CheckpointError(f"{path}: field {name!r} is {value!r:.40}, but it must be true or false. Fix it, or "
                                  f"{AGAIN}.")
    layers = settings["dec_layers"]
    for name in ("eos_token_id", "bos_token_id"):  # what config.json states is checked even where another file rules
        _ids(path, config.get(name), name, vocab)
    arch: dict[str, Any] = dict(
        vocab=vocab, family="gemma" if gemma else "llama", kv_heads=kv_heads, head_dim=head_dim,
        qkv_bias=flags["attention_bias"] or model_type == "qwen2", out_bias=flags["attention_bias"],
        mlp_bias=flags["mlp_bias"], qk_norm=model_type in ("qwen3", "gemma3_text"),
        sliding_window=_window(path, config, model_type),
        layer_types=list(_layer_types(path, config, model_type, layers)),
        end_ids=list(_ids(path, end_ids, "eos_token_id", vocab) if end_ids is not None else
                     _ids(path, config.get("eos_token_id"), "eos_token_id", vocab)),
        pad_id=_ids(path, config.get("pad_token_id"), "pad_token_id", vocab)[:1][0]
        if config.get("pad_token_id") is not None else -1,
        **_rope(path, config, model_type))
    if gemma:
        arch |= _gemma(path, config, head_dim)
    try:
        return check(ModelConfig(vocab + 4, vocab + 4, kind=LLM.name, d_model=settings["d_model"], enc_layers=0,
                                 dec_layers=layers, heads=heads, ff_dim=settings["ff_dim"], dropout=0.0,
                                 max_positions=min(positions, MAX_POSITIONS), norm="pre", ln_eps=float(eps),
                                 tie_output=flags["tie_word_embeddings"], scale_embedding=False,
                                 activation=ACTIVATIONS[act_name], arch=LLMArch.from_dict(arch).to_dict()))
    except ConfigError as exc:
        raise CheckpointError(f"{path}: {exc}. Fix config.json, or {AGAIN}.") from None
