"""Kind ``m2m100``: an M2M100 or NLLB-200 Transformer (fairseq's many-to-many translation models) imported from a
Hugging Face folder.

Its network is attnviz's Transformer with fairseq's options: pre-LN layers with a final LayerNorm after each stack,
fairseq's sinusoidal positions (sin then cos halves, numbered from 2), relu, token embeddings scaled by sqrt(D) as
the config says, one embedding table for both sides tied to the output, no output bias. It reads the source as its
language tag, its pieces and ``</s>`` (``engine.text.languages``); decoding starts from ``</s>`` with the target
language's tag forced first. Folders are read by ``engine.hub.m2m100``; ``attnviz convert`` writes one checkpoint
file with the SentencePiece model and the language tags inside.
"""

from __future__ import annotations

from attnviz.engine.config import ModelConfig
from attnviz.engine.kinds.registry import ModelKind, register
from attnviz.engine.kinds.transformer import RECURRENT_SETTINGS, build_transformer, encoder_decoder_layout


def describe_multilingual(family: str, cfg: ModelConfig) -> str:
    """The architecture line of a multilingual fairseq model (M2M100/NLLB-200, mBART-50)."""
    norm = ", layernorm_embedding" if cfg.embed_norm else ""
    return (f"{family} d_model {cfg.d_model}, {cfg.enc_layers}+{cfg.dec_layers} layers, {cfg.heads} heads, "
            f"ff {cfg.ff_dim}, {cfg.activation}, {cfg.positions} positions ({cfg.max_positions}), pre-LN{norm}, "
            f"vocabulary {cfg.tgt_vocab_size:,}")


def multilingual_kind(name: str, title: str, family: str, label: str, **example: object) -> ModelKind:
    """The registry entry of a multilingual fairseq kind: attnviz's Transformer, read without a source ``<sos>``,
    with ``example`` settings (over a small pre-LN model's) for the registry-wide tests."""
    return ModelKind(
        name=name, title=title, attention_kinds=("encoder", "decoder", "cross"), has_source=True,
        build=build_transformer, layout=encoder_decoder_layout, describe=lambda cfg: describe_multilingual(family, cfg),
        unused_settings=RECURRENT_SETTINGS, short_label=label, source_bos=False,
        example_settings=dict(d_model=32, enc_layers=2, dec_layers=2, heads=4, ff_dim=64, dropout=0.0,
                              max_positions=24, norm="pre", tie_output=True, share_embeddings=True) | example)


M2M100 = register(multilingual_kind("m2m100", "M2M100 / NLLB-200 Transformer (fairseq, many-to-many)", "M2M100/NLLB",
                                    "NLLB/M2M100", positions="sinusoidal-fairseq", activation="relu"))
