"""Kind ``char-lm``: a decoder-only Transformer language model over characters (reference D).

It reads no source: the text given to it is a prefix it continues, and its one attention is masked decoder
self-attention. Its network is the Transformer without encoder and cross-attention.
"""

from __future__ import annotations

from attnviz.engine.config import ModelConfig
from attnviz.engine.kinds.registry import Layout, ModelKind, register
from attnviz.engine.kinds.transformer import RECURRENT_SETTINGS, build_transformer, describe_transformer


def _layout(cfg: ModelConfig) -> Layout:
    return {"decoder": (cfg.dec_layers, cfg.heads)}


CHAR_LM = register(ModelKind(
    name="char-lm",
    title="decoder-only character language model",
    attention_kinds=("decoder",),
    has_source=False,
    build=lambda cfg: build_transformer(cfg, has_source=False),
    layout=_layout,
    describe=lambda cfg: describe_transformer(cfg, f"{cfg.dec_layers}"),
    unused_settings=RECURRENT_SETTINGS | {"model.enc_layers", "train.bleu_sentences"},
    example_settings=dict(d_model=32, enc_layers=0, dec_layers=2, heads=4, ff_dim=64, dropout=0.0, norm="pre",
                          max_positions=12),
))
