"""Kind ``transformer``: the encoder-decoder Transformer (references A and B), every layer and head attended.

Its network is ``engine.models.transformer.Transformer``; it produces encoder self-, decoder self- and
cross-attention with ``heads`` heads in every layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnviz.engine.config import DEFAULT_KIND, ModelConfig
from attnviz.engine.kinds.registry import Layout, ModelKind, register

if TYPE_CHECKING:  # the network's type only: building it imports torch, describing it does not
    from attnviz.engine.models.protocol import IncrementalModel

RECURRENT_SETTINGS = frozenset({"model.hidden", "model.score", "train.teacher_forcing"})


def build_transformer(cfg: ModelConfig, has_source: bool = True) -> IncrementalModel:
    """The Transformer network; without a source (a language model) it has no encoder and no cross-attention."""
    from attnviz.engine.models.transformer import Transformer

    return Transformer(cfg, has_source)


def describe_transformer(cfg: ModelConfig, layers: str) -> str:
    """The architecture line shared by the Transformer kinds; ``layers`` is "3+3" or "4"."""
    return (f"d_model {cfg.d_model}, {layers} layers, {cfg.heads} heads, ff {cfg.ff_dim}, {cfg.positions} "
            f"positions ({cfg.max_positions}), {cfg.norm}-LN")


def encoder_decoder_layout(cfg: ModelConfig) -> Layout:
    return {"encoder": (cfg.enc_layers, cfg.heads), "decoder": (cfg.dec_layers, cfg.heads),
            "cross": (cfg.dec_layers, cfg.heads)}


TRANSFORMER = register(ModelKind(
    name=DEFAULT_KIND,  # the kind of a config that names none
    title="Transformer encoder-decoder",
    attention_kinds=("encoder", "decoder", "cross"),
    has_source=True,
    build=build_transformer,
    layout=encoder_decoder_layout,
    describe=lambda cfg: describe_transformer(cfg, f"{cfg.enc_layers}+{cfg.dec_layers}"),
    unused_settings=RECURRENT_SETTINGS,
    example_settings=dict(d_model=32, enc_layers=2, dec_layers=2, heads=4, ff_dim=64, dropout=0.1, max_positions=24),
))
