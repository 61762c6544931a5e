"""The torch half of the LLM folder format (``engine.hub.llm``), imported only when a folder is loaded: the folder's
weights assigned to attnviz's ``CausalLM``, and a converted LLM checkpoint's, each handed to the ``LLMTranslator``
(``engine.hub.llm_translator``).

The network's parameters carry the folder's own names, so every tensor (each shard's, read through
``engine.checkpoints.weights``: names, shapes and values checked) is assigned as it is stored, mapped from the file,
in its stored precision unless another is asked.
"""

from __future__ import annotations

import os
from pathlib import Path

from torch import Tensor

from attnviz.engine.checkpoints.assign import build_loaded
from attnviz.engine.checkpoints.header import read_header
from attnviz.engine.checkpoints.mapped import map_tensors
from attnviz.engine.checkpoints.store import check_finite
from attnviz.engine.checkpoints.weights import read_weights
from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import CheckpointError, ConfigError
from attnviz.engine.hub.llm_files import read_folder
from attnviz.engine.hub.llm_tokens import (
    parse_tokenizer,
    read_tokenizer,
    special_tokens,
)
from attnviz.engine.hub.llm_translator import TOKENIZER_TENSOR, LLMTranslator
from attnviz.engine.kinds import check
from attnviz.engine.models.llm_arch import LLMArch
from attnviz.engine.translator import check_index


def load_llm(folder: str | Path, dtype: str = "float32") -> LLMTranslator:
    """A ready translator for an LLM folder at ``dtype`` (CheckpointError with a clear message otherwise)."""
    folder = Path(folder)
    parts = read_folder(folder)
    tokenizer = read_tokenizer(folder, parts.arch.vocab)
    weights: dict[str, Tensor] = {}
    for plan in parts.plans:
        weights |= read_weights(plan)
    model = build_loaded(folder, parts.cfg, weights, dtype)
    meta = {"name": folder.resolve().name, "path": str(folder), "imported_from": f"{parts.model_type} folder",
            "generation": parts.generation}
    return LLMTranslator(model, tokenizer, parts.template, special_tokens(folder), meta, folder / "chat_template")


def load_llm_checkpoint(path: str | os.PathLike[str], dtype: str = "float32") -> LLMTranslator:
    """An LLM saved as one attnviz checkpoint (``attnviz convert``): its header and tensors checked as any
    checkpoint's, its stored tokenizer as a folder's ``tokenizer.json``, its template compiled in the sandbox."""
    path = Path(path)
    meta, index = read_header(path)
    try:
        cfg = check(ModelConfig.from_dict(meta.get("model")))  # type: ignore[arg-type]  # checked as a dict there
    except (ConfigError, TypeError) as exc:
        raise CheckpointError(f"{path}: its model settings are invalid: {exc}") from None
    check_index(path, cfg, index)
    tensors = map_tensors(path, index, "a checkpoint file; choose a .safetensors file")
    stored = tensors.pop(TOKENIZER_TENSOR, None)
    if stored is None:
        raise CheckpointError(f"{path} is an LLM checkpoint without its tokenizer; convert the folder again.")
    tokenizer = parse_tokenizer(f"{path} (its tokenizer)", bytes(stored.numpy()), LLMArch.from_dict(cfg.arch).vocab)
    template, specials = meta.get("chat_template"), meta.get("special_tokens") or {}
    if not (template is None or isinstance(template, str)) or not (
            isinstance(specials, dict) and all(isinstance(v, str) for v in specials.values())):
        raise CheckpointError(f"{path}: its chat template or special tokens are damaged; convert the folder again.")
    check_finite(path, tensors)
    model = build_loaded(path, cfg, tensors, dtype)
    meta["path"] = str(path)
    return LLMTranslator(model, tokenizer, template, specials, meta, path)
