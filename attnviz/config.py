"""Frozen, validated configuration dataclasses shared by the engine, the CLI and the GUI.

Each config checks itself on creation (``__post_init__``) so a bad value fails where it is typed, with a message
that names the field, and round-trips through plain dicts (``to_dict``/``from_dict``) for checkpoint metadata.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from attnviz.engine.errors import ConfigError

C = TypeVar("C", bound="_DictMixin")


class _DictMixin:
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[C], data: dict[str, Any]) -> C:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"{cls.__name__}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        return cls(**data)

    def replace(self: C, **changes: Any) -> C:
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


MODEL_KINDS = ("transformer",)


@dataclass(frozen=True)
class ModelConfig(_DictMixin):
    """Architecture of an encoder-decoder Transformer (reference A's settings are the defaults)."""

    src_vocab_size: int
    tgt_vocab_size: int
    kind: str = "transformer"
    d_model: int = 256  # D, the width of every residual stream
    enc_layers: int = 3
    dec_layers: int = 3
    heads: int = 8  # H; the head width is d_model // heads
    ff_dim: int = 512
    dropout: float = 0.1  # on embeddings, sublayer outputs and attention probabilities
    positions: str = "learned"  # "learned" table or fixed "sinusoidal"
    max_positions: int = 100  # the longest sequence (with <sos>/<eos>) either side accepts
    norm: str = "post"  # "post": LN(x + f(x)) as the references; "pre": x + f(LN(x)) with a final LN
    ln_eps: float = 1e-5
    tie_output: bool = False  # share the target embedding with the output projection

    def __post_init__(self) -> None:
        _require(self.kind in MODEL_KINDS, f"kind must be one of {MODEL_KINDS}, not {self.kind!r}")
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "heads", "ff_dim", "max_positions"):
            _require(int(getattr(self, name)) >= 1, f"{name} must be a positive integer, not {getattr(self, name)!r}")
        _require(self.enc_layers >= 0 and self.dec_layers >= 1, "need enc_layers >= 0 and dec_layers >= 1")
        _require(self.d_model % self.heads == 0, f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        _require(0.0 <= self.dropout < 1.0, f"dropout must be in [0, 1), not {self.dropout}")
        _require(self.positions in ("learned", "sinusoidal"), f"positions must be 'learned' or 'sinusoidal', not {self.positions!r}")
        _require(self.norm in ("post", "pre"), f"norm must be 'post' or 'pre', not {self.norm!r}")
        _require(self.max_positions >= 3, "max_positions must be at least 3 (<sos>, one token, <eos>)")
        _require(self.ln_eps > 0, "ln_eps must be positive")


@dataclass(frozen=True)
class DecodeConfig(_DictMixin):
    """How to search for a translation."""

    max_len: int = 50  # output tokens, <eos> included
    beam: int = 1  # 1 = greedy
    length_penalty: float = 1.0  # GNMT alpha for beam search; 0 disables
    topk: int = 10  # candidates reported per step

    def __post_init__(self) -> None:
        _require(self.max_len >= 1, f"max_len must be at least 1, not {self.max_len}")
        _require(self.beam >= 1, f"beam must be at least 1, not {self.beam}")
        _require(self.length_penalty >= 0, f"length_penalty must be >= 0, not {self.length_penalty}")
        _require(self.topk >= 1, f"topk must be at least 1, not {self.topk}")
