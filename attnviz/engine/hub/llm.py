"""The decoder-only LLM folder format (Llama, Mistral, Qwen2/3, Gemma 2/3 as the Hugging Face Hub lays them out):
registered with ``engine.hub``. Inspecting a folder reads and checks its files (``engine.hub.llm_files``) and its
tokenizer and chat template (``engine.hub.llm_tokens``) without torch; loading maps its weights onto attnviz's
``CausalLM`` (``engine.hub.llm_weights``, imported only then).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from attnviz.engine.checkpoints.card import card_from_metadata
from attnviz.engine.hub.llm_config import MODEL_TYPES, refusal
from attnviz.engine.hub.llm_files import read_folder
from attnviz.engine.hub.llm_tokens import compile_template, read_tokenizer, token_labels
from attnviz.engine.hub.marian_files import model_type
from attnviz.engine.hub.registry import FolderFormat, FolderPlan, register
from attnviz.engine.text.vocab import SPECIALS

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator


def _recognises(folder: Path) -> bool:
    return (folder / "config.json").exists() and model_type(folder) in MODEL_TYPES


def llm_plan(folder: Path) -> FolderPlan:
    """An LLM folder's card and weight plans, every file but the weights' values read and checked, without torch."""
    parts = read_folder(folder)
    tokenizer = read_tokenizer(folder, parts.arch.vocab)
    if parts.template is not None:
        compile_template(folder / "chat_template", parts.template)
    parameters = sum(math.prod(shape) for plan in parts.plans for shape in plan.required.values())
    vocab = [*SPECIALS, *token_labels(tokenizer, parts.arch.vocab)]
    spec = {"mode": "whitespace", "lowercase": False}
    meta = {"name": folder.resolve().name, "model": parts.cfg.to_dict(), "src_vocab": vocab, "tgt_vocab": vocab,
            "src_tokenizer": spec | {"lang": "de"}, "tgt_tokenizer": spec | {"lang": "en"},
            "generation": parts.generation}
    return FolderPlan(card_from_metadata(meta, parameters, str(folder)), parts.plans[0], parts.plans[1:],
                      unchecked=parts.unchecked)


def _load(folder: Path, dtype: str) -> Translator:
    from attnviz.engine.hub.llm_weights import load_llm  # torch: only when a folder is loaded

    return load_llm(folder, dtype)


LLM_FOLDER = register(FolderFormat(
    name="hf-llm",
    title="decoder-only LLM folder (Llama, Mistral, Qwen2/3, Gemma 2/3, from the Hugging Face Hub)",
    recognises=_recognises,
    inspect=llm_plan,
    load=_load,
    identify=lambda folder: refusal(model_type(folder)),
))
