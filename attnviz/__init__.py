"""attnviz: watch a translation model decode, and see every layer and head of its attention.

The public API for notebooks and scripts is ``attnviz.load`` (see ``attnviz.api``); it imports nothing heavy until a
model is loaded::

    import attnviz
    model = attnviz.load("de-en-multi30k")       # a bundled model, a .safetensors checkpoint or a model folder
    result = model.translate("Ein Mann fährt Fahrrad.")
    result.attention("cross", layer=-1)          # shows itself in Jupyter

``load_translator`` gives the engine's ``Translator`` itself (step and beam events, probe points).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from attnviz._version import __version__

__all__ = ["__version__", "bundled", "load", "load_translator"]

if TYPE_CHECKING:
    from attnviz.api import Model
    from attnviz.engine.translator import Translator


def load(name: str | os.PathLike[str], dtype: str = "auto") -> Model:
    """Open a model for the notebook API: a bundled model by name (``bundled()`` lists them), a ``.safetensors``
    checkpoint, a GGUF file, an imported model's folder, or a Hugging Face cache / Ollama name; see
    ``attnviz.api.load``."""
    from attnviz.api import load as _load

    return _load(name, dtype)


def bundled() -> tuple[str, ...]:
    """The names of the bundled models ``load`` accepts, the default one first."""
    from attnviz.api import bundled as _bundled

    return _bundled()


def load_translator(path, dtype: str = "auto", device: str = "cpu") -> Translator:
    """Load a checkpoint file or an imported model's folder into a ``Translator`` running at ``dtype`` ("auto",
    "float32", "float16" or "bfloat16") on ``device`` ("cpu", "cuda": a decoder-only LLM on the GPU, or "auto");
    raises ``CheckpointError`` with a clear message on a bad one, one too large for the available memory, or a
    device that cannot run it."""
    from attnviz.engine.loading import load_translator as _load

    return _load(path, dtype, device)
