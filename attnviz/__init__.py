"""attnviz: watch a translation model decode, and see every layer and head of its attention.

The small public API lives here and imports nothing heavy until it is used::

    from attnviz import load_translator
    tr = load_translator("models/de-en-multi30k.safetensors")
    t = tr.translate("Ein Mann fährt Fahrrad.")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnviz._version import __version__

__all__ = ["__version__", "load_translator"]

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator


def load_translator(path, dtype: str = "auto") -> Translator:
    """Load a checkpoint file or an imported model's folder into a ``Translator`` running at ``dtype`` ("auto",
    "float32", "float16" or "bfloat16"; raises ``CheckpointError`` with a clear message on a bad one, or one too large
    for the available memory)."""
    from attnviz.engine.loading import load_translator as _load

    return _load(path, dtype)
