"""The GGUF file format (llama.cpp, Ollama, LM Studio): a decoder-only LLM in one file, registered with
``engine.hub``. Reading its header, metadata and tensor index (``hub.gguf_format``), its config and tensor names
as a Hugging Face folder's (``hub.gguf_config``) and its tokenizer and chat template (``hub.gguf_tokens``) needs no
torch; loading dequantizes every tensor onto the LLM folder's network (``hub.gguf_weights``, imported only then).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.engine.checkpoints.card import ModelCard
from attnviz.engine.checkpoints.folder import WeightPlan, check_shapes
from attnviz.engine.checkpoints.memory import memory_by_dtype
from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub.gguf_config import architecture, hf_config, hf_names
from attnviz.engine.hub.gguf_format import AGAIN_GGUF, GGUFFile, is_gguf, read_gguf
from attnviz.engine.hub.gguf_tokens import gguf_specials, gguf_tokenizer
from attnviz.engine.hub.llm import llm_card
from attnviz.engine.hub.llm_config import model_config
from attnviz.engine.hub.llm_files import MAX_TEMPLATE_BYTES, weight_names
from attnviz.engine.hub.llm_tokens import compile_template
from attnviz.engine.hub.parsed import once
from attnviz.engine.hub.registry import FolderFormat, Inspection, LoadPlan, register
from attnviz.engine.kinds import get_kind
from attnviz.engine.kinds.llm import LLM

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

FLOAT_TYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}
NOT_CHECKED = ("values (run with --check to dequantize every tensor)",)


@dataclass(frozen=True)
class GGUFModel:
    """What a GGUF file says, checked: the file, the config its metadata implies, each tensor's folder name, the
    tokenizer and the chat template."""

    found: GGUFFile
    cfg: ModelConfig
    names: dict[str, str]  # GGUF tensor name -> the folder's
    tokenizer: Any
    template: str | None
    specials: dict[str, str]

    @property
    def parameters(self) -> int:
        return sum(math.prod(t.shape) for t in self.found.tensors.values())

    @property
    def stored_dtype(self) -> str:
        """The precision its weights are stored at: a float type's, or float32 for quantized weights (dequantized
        values are exact in float32)."""
        weights = [t.type_name for t in self.found.tensors.values() if len(t.shape) > 1]
        most = max(set(weights), key=weights.count) if weights else "F32"
        return FLOAT_TYPES.get(most, "float32")


def _template(found: GGUFFile) -> str | None:
    source = found.metadata.get("tokenizer.chat_template")
    if source is None:
        return None
    if not isinstance(source, str) or len(source.encode("utf-8")) > MAX_TEMPLATE_BYTES:
        raise CheckpointError(f"{found.path}: tokenizer.chat_template must be a template's text of at most "
                              f"{MAX_TEMPLATE_BYTES // 1024} KB; {AGAIN_GGUF}.")
    compile_template(f"{found.path} (tokenizer.chat_template)", source)
    return source


def _end_ids(found: GGUFFile) -> list[int]:
    """The tokens that end an answer: EOS, and the end of a turn or message where the file names them."""
    ids = [found.metadata.get(f"tokenizer.ggml.{key}") for key in ("eos_token_id", "eot_token_id", "eom_token_id")]
    return list(dict.fromkeys(i for i in ids if i is not None))


@once
def read_model(path: Path) -> GGUFModel:
    """Every part of a GGUF model but its weights' values, checked (CheckpointError saying what is wrong)."""
    found = read_gguf(path)
    arch = architecture(found)
    cfg = model_config(path, hf_config(found), _end_ids(found))
    names = hf_names(found)
    expected = weight_names(cfg)
    tied = {"lm_head.weight": "tied to the embedding"} if cfg.tie_output else {}
    check_shapes(WeightPlan(path, expected, unused=tied),
                 {names[n]: list(t.shape) for n, t in found.tensors.items()})
    return GGUFModel(found, cfg, names, gguf_tokenizer(found, arch), _template(found), gguf_specials(found))


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
