"""Kind ``rnn-attention``: an LSTM encoder-decoder with Luong global attention (reference C).

``d_model`` is the embedding width, ``hidden`` the LSTM width, ``enc_layers``/``dec_layers`` the LSTM depths and
``score`` the attention score (``dot``, ``general`` or ``concat``). Its one attention is reported as
cross-attention with one layer and one head. It can train with a teacher-forcing ratio below 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import ConfigError
from attnviz.engine.kinds.registry import Layout, ModelKind, register

if TYPE_CHECKING:  # the network's type only: building it imports torch, describing it does not
    from attnviz.engine.models.protocol import IncrementalModel


def _build(cfg: ModelConfig) -> IncrementalModel:
    from attnviz.engine.models.rnn import RNNAttention

    return RNNAttention(cfg)


def _validate(cfg: ModelConfig) -> None:
    if cfg.enc_layers != cfg.dec_layers:
        raise ConfigError("an LSTM encoder-decoder starts its decoder from the encoder's final states, so it needs "
                          f"enc_layers == dec_layers (got {cfg.enc_layers} and {cfg.dec_layers})")


def _describe(cfg: ModelConfig) -> str:
    return (f"LSTM {cfg.enc_layers}+{cfg.dec_layers} layers, embedding {cfg.d_model}, hidden {cfg.hidden}, "
            f"{cfg.score} attention" + (", tied output" if cfg.tie_output else ""))


def _layout(cfg: ModelConfig) -> Layout:
    return {"cross": (1, 1)}


RNN_ATTENTION = register(ModelKind(
    name="rnn-attention",
    title="LSTM encoder-decoder with Luong attention",
    attention_kinds=("cross",),
    has_source=True,
    build=_build,
    layout=_layout,
    describe=_describe,
    unused_settings=frozenset({"model.heads", "model.ff_dim", "model.positions", "model.norm",
                               "model.max_positions"}),
    validate=_validate,
    short_label="LSTM",
    teacher_forcing=True,
    example_settings=dict(d_model=32, hidden=64, enc_layers=2, dec_layers=2, heads=4, dropout=0.0, max_positions=24),
))
