"""Every part of a GGUF model but its weights' values, read and checked without torch (``GGUFModel``): the file's
index (``hub.gguf_format``), the config and tensor names of the folder it came from (``hub.gguf_config``), every
tensor's shape against that config, the tokenizer and the chat template (``hub.gguf_tokens``, compiled in the
sandbox). ``hub.gguf`` registers the format; ``hub.gguf_weights`` loads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnviz.engine.checkpoints.folder import WeightPlan, check_shapes
from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub.gguf_config import architecture, hf_config, hf_names
from attnviz.engine.hub.gguf_format import AGAIN_GGUF, GGUFFile, read_gguf
from attnviz.engine.hub.gguf_tokens import gguf_specials, gguf_tokenizer
from attnviz.engine.hub.llm_config import model_config
from attnviz.engine.hub.llm_files import MAX_TEMPLATE_BYTES, weight_names
from attnviz.engine.hub.llm_tokens import compile_template
from attnviz.engine.hub.parsed import once

FLOAT_TYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


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
