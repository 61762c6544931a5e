"""Loading an LLM folder's weights into attnviz's ``CausalLM``: the torch half of the format ``engine.hub.llm``
registers, imported only when a folder is loaded. The network's parameters carry the folder's own names, so every
tensor (each shard's, read through ``engine.checkpoints.weights``: names, shapes and values checked) is assigned as
it is stored, mapped from the file, in its stored precision unless another is asked.
"""

from __future__ import annotations

from pathlib import Path

from torch import Tensor

from attnviz.engine.checkpoints.assign import build_loaded
from attnviz.engine.checkpoints.weights import read_weights
from attnviz.engine.hub.llm_files import read_folder
from attnviz.engine.hub.llm_tokens import compile_template, read_tokenizer, special_tokens
from attnviz.engine.hub.llm_translator import LLMTranslator


def load_llm(folder: str | Path, dtype: str = "float32") -> LLMTranslator:
    """A ready translator for an LLM folder at ``dtype`` (CheckpointError with a clear message otherwise)."""
    folder = Path(folder)
    parts = read_folder(folder)
    tokenizer = read_tokenizer(folder, parts.arch.vocab)
    template = None if parts.template is None else compile_template(folder / "chat_template", parts.template)
    weights: dict[str, Tensor] = {}
    for plan in parts.plans:
        weights |= read_weights(plan)
    model = build_loaded(folder, parts.cfg, weights, dtype)
    meta = {"name": folder.resolve().name, "path": str(folder), "imported_from": f"{parts.model_type} folder",
            "generation": parts.generation}
    return LLMTranslator(model, tokenizer, template, special_tokens(folder), meta)
