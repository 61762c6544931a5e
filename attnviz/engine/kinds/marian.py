"""Kind ``marian``: a MarianMT Transformer (the OPUS-MT models) imported from a Hugging Face folder.

Its network is attnviz's Transformer with Marian's options (post-LN, sinusoidal positions with sin in the first
half and cos in the second, swish or another activation, embeddings shared between source and target and tied to
the output, ``final_logits_bias`` as the output bias). It reads the source as its pieces and ``</s>``, with no
start token; decoding starts from Marian's decoder start token (attnviz's ``<sos>`` maps onto it). Folders are read
by ``engine.hub.marian``; ``attnviz convert`` writes one checkpoint file with both SentencePiece models inside.
"""

from __future__ import annotations

from attnviz.engine.config import ModelConfig
from attnviz.engine.kinds.registry import ModelKind, register
from attnviz.engine.kinds.transformer import RECURRENT_SETTINGS, build_transformer, encoder_decoder_layout


def _describe(cfg: ModelConfig) -> str:
    shared = ", shared embeddings" if cfg.share_embeddings else ", separate embeddings"
    return (f"MarianMT d_model {cfg.d_model}, {cfg.enc_layers}+{cfg.dec_layers} layers, {cfg.heads} heads, "
            f"ff {cfg.ff_dim}, {cfg.activation}, {cfg.positions} positions ({cfg.max_positions}){shared}")


MARIAN = register(ModelKind(
    name="marian",
    title="MarianMT Transformer (OPUS-MT)",
    attention_kinds=("encoder", "decoder", "cross"),
    has_source=True,
    build=build_transformer,
    layout=encoder_decoder_layout,
    describe=_describe,
    unused_settings=RECURRENT_SETTINGS,
    short_label="MarianMT",
    source_bos=False,
    example_settings=dict(d_model=32, enc_layers=2, dec_layers=2, heads=4, ff_dim=64, dropout=0.0, max_positions=24,
                          positions="sinusoidal-halves", activation="swish", tie_output=True, share_embeddings=True),
))
