"""Kind ``mbart``: an mBART-50 Transformer (many-to-one or many-to-many translation) imported from a Hugging Face
folder.

Its network is attnviz's Transformer with mBART's options: pre-LN layers with a final LayerNorm after each stack,
learned positions (the folder's table without fairseq's first two rows), a LayerNorm over token + position
embeddings (``layernorm_embedding``), gelu, one embedding table tied to the output with ``final_logits_bias``. It
reads the source as ``[src_lang] pieces </s>`` (``de_DE``, ``fr_XX``); decoding starts from ``</s>`` with the
target language's tag (``en_XX``) forced first. Folders are read by ``engine.hub.mbart``.
"""

from __future__ import annotations

from attnviz.engine.kinds.m2m100 import describe_multilingual
from attnviz.engine.kinds.registry import ModelKind, register
from attnviz.engine.kinds.transformer import RECURRENT_SETTINGS, build_transformer, encoder_decoder_layout

MBART = register(ModelKind(
    name="mbart",
    title="mBART-50 Transformer (fairseq, many-to-one / many-to-many)",
    attention_kinds=("encoder", "decoder", "cross"),
    has_source=True,
    build=build_transformer,
    layout=encoder_decoder_layout,
    describe=lambda cfg: describe_multilingual("mBART", cfg),
    unused_settings=RECURRENT_SETTINGS,
    short_label="mBART",
    source_bos=False,
    example_settings=dict(d_model=32, enc_layers=2, dec_layers=2, heads=4, ff_dim=64, dropout=0.0, max_positions=24,
                          positions="learned", norm="pre", activation="gelu", tie_output=True, share_embeddings=True,
                          embed_norm=True),
    value_vectors=True,
))
