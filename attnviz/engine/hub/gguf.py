"""The GGUF file format (llama.cpp, Ollama, LM Studio): a decoder-only LLM in one file, registered with
``engine.hub``. Reading its header, metadata and tensor index (``hub.gguf_format``), its config and tensor names
as a Hugging Face folder's (``hub.gguf_config``) and its tokenizer and chat template (``hub.gguf_tokens``) needs no
torch; loading dequantizes every tensor onto the LLM folder's network (``hub.gguf_weights``, imported only then).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from attnviz.engine.checkpoints.card import ModelCard
from attnviz.engine.checkpoints.memory import memory_by_dtype
from attnviz.engine.hub.gguf_files import read_model
from attnviz.engine.hub.gguf_format import is_gguf
from attnviz.engine.hub.llm import llm_card
from attnviz.engine.hub.registry import FolderFormat, Inspection, LoadPlan, register
from attnviz.engine.kinds import get_kind
from attnviz.engine.kinds.llm import LLM

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

NOT_CHECKED = ("values (run with --check to dequantize every tensor)",)


def card(path: Path) -> ModelCard:
    model = read_model(path)
    name = str(model.found.metadata.get("general.name") or path.stem)
    return llm_card(name, model.cfg, model.tokenizer, {}, model.parameters, path)


def examine(path: Path) -> Inspection:
    """The card and what was read: header, metadata, tokenizer and template, every tensor's name and shape against
    the config; the quantisation types and the weights' size at each precision."""
    model = read_model(path)
    found = model.found
    types = ", ".join(f"{name} x{count}" for name, count in found.type_counts().items())
    sizes = ", ".join(f"{dtype} {size / 2**30:.2f} GiB" for dtype, size in memory_by_dtype(model.parameters).items())
    checked = (f"{path.name}: GGUF version {found.version}, {len(found.metadata)} metadata keys, "
               f"{len(found.tensors)} tensors against the config: names, shapes, offsets",
               f"tokenizer ({found.metadata.get('tokenizer.ggml.model')}) and chat template "
               f"({'none' if model.template is None else 'compiled in the sandbox'})")
    notes = (f"quantisation: {types}", f"weights dequantized: {sizes}")
    return Inspection(card(path), checked, notes, NOT_CHECKED)


def plan_load(path: Path) -> LoadPlan:
    model = read_model(path)
    return LoadPlan(model.stored_dtype, model.parameters, get_kind(LLM.name), card(path))


def load(path: Path, dtype: str) -> Translator:
    from attnviz.engine.hub.gguf_weights import load_gguf  # torch: only when a file is loaded

    return load_gguf(path, dtype)


GGUF_FILE = register(FolderFormat(
    name="gguf",
    title="GGUF file (llama.cpp, Ollama, LM Studio: Llama, Mistral, Qwen2/3, Gemma 2/3)",
    recognises=lambda path: path.suffix.lower() == ".gguf" or is_gguf(path),  # by name too: its reader says why not
    inspect=None,
    load=load,
    reads="file",
    suffixes=(".gguf",),
    examine=examine,
    plan_load=plan_load,
    card=card,
))
