"""Opening a model by its path: an attnviz checkpoint file, or an imported model's folder.

``load_translator(path)`` gives a ready ``Translator``; ``read_card(path)`` its ``ModelCard`` without torch (what
the model picker and ``attnviz info`` show). A folder goes to the registered folder format that recognises it
(``engine.hub``; a clear error naming the known formats when none does), a file is a checkpoint
(``engine.translator.load_checkpoint``, ``engine.checkpoints.card.checkpoint_card``). This module names no format.
Describing needs no torch: the translator module, which imports it, is imported only when a model is loaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from attnviz.engine.checkpoints.card import ModelCard, checkpoint_card
from attnviz.engine.checkpoints.header import require_path
from attnviz.engine.hub import format_of

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator


def load_translator(path: str | os.PathLike[str]) -> Translator:
    """A checkpoint file or an imported model's folder as a ready ``Translator`` (``CheckpointError`` with a clear
    message otherwise)."""
    if require_path(path).is_dir():
        return format_of(path).load(Path(path))
    from attnviz.engine.translator import load_checkpoint  # torch: only when a model is loaded

    return load_checkpoint(path)


def read_card(path: str | os.PathLike[str]) -> ModelCard:
    """The card of a checkpoint file (from its header) or of an imported model's folder, without torch."""
    if Path(path).is_dir():
        return format_of(path).describe(Path(path))
    return checkpoint_card(path)
