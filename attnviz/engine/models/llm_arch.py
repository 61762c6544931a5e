"""The architecture of a decoder-only LLM beyond ``ModelConfig``'s fields: the switches that tell the Llama-like
family (Llama, Mistral, Qwen2, Qwen3) and the Gemma-like one (Gemma 2, Gemma 3) apart. Torch-free: a folder's card
is described with it, and the network (``engine.models.causal_lm``) is built from it.

``ModelConfig`` keeps what every kind has (width ``d_model``, ``dec_layers``, query ``heads``, ``ff_dim``,
``ln_eps`` as the RMSNorm epsilon, ``tie_output``, ``activation``: ``swish`` is SiLU, ``gelu_new`` the tanh GELU);
the rest is an ``LLMArch`` stored in ``ModelConfig.arch`` as a plain dict and read back with ``LLMArch.from_dict``,
which checks every field by name.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnviz.engine.errors import ConfigError

FAMILIES = ("llama", "gemma")  # Llama-like: 2 RMSNorms per layer, w * x; Gemma-like: 4, (1 + w) * x, x * sqrt(D)
ROPE_TYPES = ("default", "linear", "llama3")
LAYER_TYPES = ("full_attention", "sliding_attention")
MAX_VOCAB = 2_000_000


@dataclass(frozen=True)
class LLMArch:
    """A decoder-only network's switches (the defaults are Llama's)."""

    vocab: int  # the embedding's rows: a folder's vocabulary, or attnviz's own for a model built over it
    # attnviz's id of the model's row i is i + offset: 4 for a folder's vocabulary (attnviz's specials first, the end
    # token the best of ``end_ids``), 0 for a model built over attnviz's vocabulary (its specials are rows)
    offset: int = 4
    family: str = "llama"
    kv_heads: int = 0  # grouped-query attention: key/value heads, each shared by heads // kv_heads query heads
    head_dim: int = 0  # per head; may differ from d_model // heads (Qwen3, Gemma)
    rope_theta: float = 10000.0
    rope_local_theta: float = 0.0  # Gemma 3's sliding layers' base (0: the same as rope_theta)
    rope_type: str = "default"  # of the full-attention layers: "default", "linear" or "llama3" (Llama 3.1+)
    rope_factor: float = 1.0  # linear and llama3
    rope_low_freq: float = 1.0  # llama3
    rope_high_freq: float = 4.0  # llama3
    rope_original_positions: int = 8192  # llama3
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False  # an RMSNorm over each head's queries and keys before RoPE (Qwen3, Gemma 3)
    sliding_window: int = 0  # keys farther back than this many positions are not seen on sliding layers; 0: none
    layer_types: tuple[str, ...] = ()  # per layer, "full_attention" or "sliding_attention"; empty: all full
    attn_softcap: float = 0.0  # Gemma 2: scores -> cap * tanh(scores / cap); 0: none
    final_softcap: float = 0.0  # Gemma 2: logits likewise
    query_scale: float = 0.0  # Gemma: queries scaled by query_pre_attn_scalar ** -0.5; 0: head_dim ** -0.5
    end_ids: tuple[int, ...] = ()  # the folder's ids that end an answer (Llama 3 names three)
    pad_id: int = -1  # the folder's pad id, -1 when it names none

    def __post_init__(self) -> None:
        def need(ok: bool, message: str) -> None:
            if not ok:
                raise ConfigError(message)

        need(self.family in FAMILIES, f"arch.family must be one of {FAMILIES}, not {self.family!r}")
        need(self.rope_type in ROPE_TYPES, f"rope type {self.rope_type!r} is not one attnviz computes; it computes "
             f"{', '.join(ROPE_TYPES)}")
        need(1 <= self.vocab <= MAX_VOCAB, f"arch.vocab must be between 1 and {MAX_VOCAB:,}, not {self.vocab}")
        need(self.kv_heads >= 1 and self.head_dim >= 2 and self.head_dim % 2 == 0,
             f"arch needs kv_heads >= 1 and an even head_dim >= 2 (got {self.kv_heads} and {self.head_dim})")
        for name in ("rope_theta", "rope_factor", "rope_original_positions"):
            value = getattr(self, name)
            need(math.isfinite(value) and value > 0, f"arch.{name} must be a positive number, not {value}")
        need(self.rope_high_freq > self.rope_low_freq > 0 or self.rope_type != "llama3",
             "llama3 RoPE needs high_freq_factor > low_freq_factor > 0")
        need(all(t in LAYER_TYPES for t in self.layer_types), f"layer_types must each be one of {LAYER_TYPES}")
        need(self.sliding_window >= 0 and min(self.attn_softcap, self.final_softcap, self.query_scale) >= 0,
             "sliding_window, softcaps and query_scale must not be negative")
        need(all(0 <= i < self.vocab for i in self.end_ids), f"end ids {list(self.end_ids)} must be below {self.vocab}")
        need(self.offset in (0, 4), f"arch.offset must be 4 (a folder's vocabulary) or 0 (attnviz's), not "
             f"{self.offset}")

    def check_layers(self, layers: int, heads: int) -> None:
        """The switches agree with the layer and head counts of the ``ModelConfig`` they sit in."""
        if heads % self.kv_heads:
            raise ConfigError(f"{heads} query heads cannot share {self.kv_heads} key/value heads evenly")
        if self.layer_types and len(self.layer_types) != layers:
            raise ConfigError(f"layer_types names {len(self.layer_types)} layers, but the model has {layers}")

    def sliding(self, layer: int) -> bool:
        """Whether ``layer`` sees only the last ``sliding_window`` positions."""
        if not self.sliding_window:
            return False
        return not self.layer_types or self.layer_types[layer] == "sliding_attention"

    def outside_window(self, kind: str, layer: int, src_len: int, rows: int, cols: int) -> np.ndarray | None:
        """[rows, cols] True at the cells of one sentence's ``kind`` map (``encoder``: the prompt over itself,
        ``cross``: output steps over the prompt, ``decoder``: over the output) that ``layer``'s sliding window
        leaves out: zero by construction, not weights the model chose. None when the layer sees everything. The
        prompt read has ``src_len`` tokens at positions 0..; the first output step's query is at ``src_len``."""
        if not self.sliding(layer):
            return None
        q = np.arange(rows)[:, None] + (0 if kind == "encoder" else src_len)
        k = np.arange(cols)[None, :] + (src_len if kind == "decoder" else 0)
        return (q - k >= self.sliding_window) & (k <= q)

    @property
    def scale(self) -> float:
        """What queries . keys are multiplied by before the softmax."""
        return self.query_scale ** -0.5 if self.query_scale else self.head_dim ** -0.5

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["layer_types"], data["end_ids"] = list(self.layer_types), list(self.end_ids)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> LLMArch:
        """An arch from its stored dict, every field named and typed (``ConfigError`` otherwise)."""
        if not isinstance(data, dict):
            raise ConfigError(f"arch must be a JSON object, not {type(data).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ConfigError(f"arch: unknown setting(s) {', '.join(unknown)[:120]}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            kind = str(fields[name].type)
            if kind.startswith("tuple"):
                if not isinstance(value, (list, tuple)) or len(value) > 10_000:
                    raise ConfigError(f"arch.{name} must be a list, not {value!r:.40}")
                wanted: type = str if "str" in kind else int
                if not all(isinstance(v, wanted) and not isinstance(v, bool) for v in value):
                    raise ConfigError(f"arch.{name} must list {wanted.__name__} values, not {value!r:.40}")
                value = tuple(value)
            elif kind == "bool" and not isinstance(value, bool):
                raise ConfigError(f"arch.{name} must be true or false, not {value!r:.40}")
            elif kind in ("int", "float") and (isinstance(value, bool) or not isinstance(value, (int, float))
                                               or (kind == "int" and not isinstance(value, int))
                                               or not math.isfinite(value)):
                raise ConfigError(f"arch.{name} must be a {'whole ' if kind == 'int' else ''}number, not "
                                  f"{value!r:.40}")
            elif kind == "str" and not isinstance(value, str):
                raise ConfigError(f"arch.{name} must be text, not {value!r:.40}")
            values[name] = float(value) if kind == "float" else value
        if "vocab" not in values:
            raise ConfigError("arch.vocab is missing")
        return cls(**values)
