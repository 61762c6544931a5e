"""Kind ``llm``: a decoder-only translation LLM (Llama-, Mistral-, Qwen2/3- and Gemma 2/3-family folders, read by
``engine.hub.llm``) that reads a prompt as its source.

Its network is ``engine.models.causal_lm.CausalLM``; its switches (grouped-query attention, RoPE, norms, sliding
windows, softcaps) are an ``LLMArch`` in ``ModelConfig.arch``. One attention per layer is seen three ways: over the
prompt while it is read (``encoder``: prompt self-attention), from each output step over the prompt (``cross``)
and over the output so far (``decoder``); the three are the same heads, so a head switched off in any of
the three is off in the prompt's pass and every step. Its probe points are named by the pass, as an
encoder-decoder's: the prompt's ``embed.src`` and ``enc.{l}.*``, the steps' ``embed.tgt`` and ``dec.{l}.*``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import ConfigError
from attnviz.engine.events import AttentionKind
from attnviz.engine.kinds.registry import Layout, ModelKind, register
from attnviz.engine.models.llm_arch import LLMArch

if TYPE_CHECKING:
    from attnviz.engine.models.protocol import IncrementalModel

FAMILY_NAMES = {"llama": "Llama-like", "gemma": "Gemma-like"}


def _build(cfg: ModelConfig) -> IncrementalModel:
    from attnviz.engine.models.causal_lm import CausalLM

    return CausalLM(cfg)


def _layout(cfg: ModelConfig) -> Layout:
    return {"cross": (cfg.dec_layers, cfg.heads), "decoder": (cfg.dec_layers, cfg.heads),
            "encoder": (cfg.dec_layers, cfg.heads)}


def _validate(cfg: ModelConfig) -> None:
    arch = LLMArch.from_dict(cfg.arch)
    arch.check_layers(cfg.dec_layers, cfg.heads)
    if cfg.enc_layers:
        raise ConfigError("a decoder-only LLM has no encoder layers (enc_layers 0)")
    if cfg.src_vocab_size != cfg.tgt_vocab_size or cfg.tgt_vocab_size != arch.vocab + arch.offset:
        raise ConfigError(f"an LLM's vocabulary sizes are its embedding's {arch.vocab:,} rows + {arch.offset} "
                          f"(attnviz's specials before a folder's tokens), not {cfg.src_vocab_size:,}/"
                          f"{cfg.tgt_vocab_size:,}")
    if cfg.activation not in ("swish", "gelu_new"):
        raise ConfigError(f"an LLM's feed-forward is gated by swish (SiLU) or gelu_new, not {cfg.activation!r}")


def describe_llm(cfg: ModelConfig) -> str:
    arch = LLMArch.from_dict(cfg.arch)
    sliding = sum(arch.sliding(i) for i in range(cfg.dec_layers))
    window = f", {sliding} sliding-window layers ({arch.sliding_window:,})" if sliding else ""
    rope = f"RoPE {arch.rope_type} (base {arch.rope_theta:,g})"
    return (f"{FAMILY_NAMES[arch.family]} decoder, d_model {cfg.d_model}, {cfg.dec_layers} layers, {cfg.heads} query "
            f"heads sharing {arch.kv_heads} key/value heads (head_dim {arch.head_dim}), ff {cfg.ff_dim}, {rope}"
            f"{window}, vocabulary {arch.vocab:,}")


# built over attnviz's own vocabulary (the test suite's toy ones: 4 specials and 12 words)
EXAMPLE_ARCH = dict(vocab=16, offset=0, family="llama", kv_heads=2, head_dim=8, qkv_bias=True)

LLM = register(ModelKind(
    name="llm",
    title="decoder-only LLM",
    attention_kinds=("cross", "decoder", "encoder"),
    has_source=True,
    build=_build,
    layout=_layout,
    describe=describe_llm,
    unused_settings=frozenset({"model.hidden", "model.score", "train.teacher_forcing", "model.enc_layers",
                               "model.positions", "model.norm", "model.embed_norm", "model.share_embeddings",
                               "model.scale_embedding", "model.embed_init", "model.dropout"}),
    validate=_validate,
    short_label="LLM",
    source_bos=False,
    example_settings=dict(d_model=32, enc_layers=0, dec_layers=2, heads=4, ff_dim=64, dropout=0.0, norm="pre",
                          max_positions=64, activation="swish", arch=EXAMPLE_ARCH),
    reads_prompt=True,
    stored_precision=True,
    capture_dtype="float16",
    runs_on_gpu=True,
    kv_heads=lambda cfg: LLMArch.from_dict(cfg.arch).kv_heads,
    outside_window=lambda cfg, kind, layer, src_len, rows, cols: LLMArch.from_dict(cfg.arch).outside_window(
        kind, layer, src_len, rows, cols),
    same_heads={kind: ("encoder", "decoder") for kind in ("cross", "decoder", "encoder")},
    views={"cross": AttentionKind("cross", "Output → prompt", "output step (query)", "prompt token (key)"),
           "decoder": AttentionKind("decoder", "Output → own output", "output step (query)",
                                    "decoder input (key)", causal=True),
           "encoder": AttentionKind("encoder", "Prompt self-attention", "prompt token (query)", "prompt token (key)",
                                    causal=True)},
))
