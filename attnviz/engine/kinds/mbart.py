"""Kind ``mbart``: an mBART-50 Transformer (many-to-one or many-to-many translation) imported from a Hugging Face
folder.

Its network is attnviz's Transformer with mBART's options: pre-LN layers with a final LayerNorm after each stack,
learned positions (the folder's table without fairseq's first two rows), a LayerNorm over token + position
embeddings (``layernorm_embedding``), gelu, one embedding table tied to the output with ``final_logits_bias``. It
reads the source as ``[src_lang] pieces </s>`` (``de_DE``, ``fr_XX``); decoding starts from ``</s>`` with the
target language's tag (``en_XX``) forced first. Folders are read by ``engine.hub.mbart``.
"""

from __future__ import annotations

from attnviz.engine.kinds.m2m100 import multilingual_kind
from attnviz.engine.kinds.registry import register

MBART = register(multilingual_kind("mbart", "mBART-50 Transformer (fairseq, many-to-one / many-to-many)", "mBART",
                                   "mBART", positions="learned", activation="gelu", embed_norm=True))
