"""The decoder-only LLM folder format (Llama, Mistral, Qwen2/3, Gemma 2/3 as the Hugging Face Hub lays them out):
registered with ``engine.hub``. Inspecting a folder reads and checks its files (``engine.hub.llm_files``) and its
tokenizer and chat template (``engine.hub.llm_tokens``) without torch; loading maps its weights onto attnviz's
``CausalLM`` (``engine.hub.llm_weights``, imported only then).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.engine.checkpoints.card import ModelCard, card_from_metadata
from attnviz.engine.config import ModelConfig
from attnviz.engine.hub.llm_config import MODEL_TYPES, refusal
from attnviz.engine.hub.llm_files import read_folder
from attnviz.engine.hub.llm_tokens import compile_template, read_tokenizer, token_labels
from attnviz.engine.hub.marian_files import model_type
from attnviz.engine.hub.registry import FolderFormat, FolderPlan, register
from attnviz.engine.models.llm_arch import LLMArch
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
    card = llm_card(folder.resolve().name, parts.cfg, tokenizer, parts.generation, parameters, folder)
    return FolderPlan(card, parts.plans[0], parts.plans[1:], unchecked=parts.unchecked)


def llm_card(name: str, cfg: ModelConfig, tokenizer: Any, generation: dict[str, Any], parameters: int,
             path: Path) -> ModelCard:
    """The card of an LLM (a folder's, a GGUF file's): its config, its tokenizer's labels, its decoding."""
    vocab = [*SPECIALS, *token_labels(tokenizer, LLMArch.from_dict(cfg.arch).vocab)]
    spec = {"mode": "whitespace", "lowercase": False}
    meta = {"name": name, "model": cfg.to_dict(), "src_vocab": vocab, "tgt_vocab": vocab,
            "src_tokenizer": spec | {"lang": "de"}, "tgt_tokenizer": spec | {"lang": "en"}, "generation": generation}
    return card_from_metadata(meta, parameters, str(path))


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
