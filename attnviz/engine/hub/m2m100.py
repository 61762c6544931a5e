"""The M2M100 / NLLB-200 folder format (``model_type`` m2m_100, e.g. ``facebook/nllb-200-distilled-600M``,
``facebook/m2m100_418M``), as the Hugging Face Hub lays a folder out: registered with ``engine.hub``.

Reading and checking the files is shared with mBART-50 (``engine.hub.fairseq_files``: the tokenizer class tells
NLLB-200 from M2M100, whose pieces' ids come from ``vocab.json`` and whose language tags are ``__de__``); loading maps
the weights onto attnviz's Transformer (kind ``m2m100``) in ``engine.hub.fairseq_weights``, imported only then.
"""

from __future__ import annotations

from attnviz.engine.hub.fairseq import fairseq_format
from attnviz.engine.hub.fairseq_files import M2M100_TYPE
from attnviz.engine.hub.registry import register

M2M100_FOLDER = register(fairseq_format(M2M100_TYPE, "hf-m2m100",
                                        "M2M100 / NLLB-200 folder (from the Hugging Face Hub)"))
