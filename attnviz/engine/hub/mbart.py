"""The mBART-50 folder format (``model_type`` mbart, e.g. ``facebook/mbart-large-50-many-to-one-mmt`` and
``-many-to-many-mmt``), as the Hugging Face Hub lays a folder out: registered with ``engine.hub``.

Reading and checking the files is shared with M2M100 / NLLB-200 (``engine.hub.fairseq_files``; language tags
``de_DE``, ``fr_XX``, ``en_XX``); loading maps the weights onto attnviz's Transformer (kind ``mbart``: learned
positions, ``layernorm_embedding``) in ``engine.hub.fairseq_weights``, imported only then.
"""

from __future__ import annotations

from attnviz.engine.hub.fairseq import fairseq_format
from attnviz.engine.hub.fairseq_files import MBART_TYPE
from attnviz.engine.hub.registry import register

MBART_FOLDER = register(fairseq_format(MBART_TYPE, "hf-mbart", "mBART-50 folder (from the Hugging Face Hub)"))
