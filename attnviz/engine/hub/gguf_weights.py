"""The torch half of the GGUF format (``engine.hub.gguf``), imported only when a file is loaded: every tensor
dequantized by ``gguf`` (llama.cpp's own numpy code) a block of rows at a time, what llama.cpp's converter changed
undone (``hub.gguf_config``), each block checked finite and written into a tensor of the run precision, so the
peak while opening is the model at that precision plus one block in float32; then the LLM folder's network is
built over them and handed to the ``LLMTranslator`` with the file's tokenizer and chat template.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from attnviz.engine.checkpoints.assign import TORCH_DTYPES, build_loaded
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub.gguf_config import architecture, row_order, value_offset
from attnviz.engine.hub.gguf_files import read_model
from attnviz.engine.hub.gguf_format import GGUFFile, GGUFTensor
from attnviz.engine.hub.llm_translator import LLMTranslator
from attnviz.engine.models.llm_arch import LLMArch

BLOCK_BYTES = 32 * 2**20  # float32 values dequantized at once


def dequantized(found: GGUFFile, tensor: GGUFTensor, dtype: torch.dtype, order: np.ndarray | None = None,
                offset: float = 0.0) -> torch.Tensor:
    """``tensor``'s values at ``dtype``: row ``i`` of the result is stored row ``order[i]`` (all in order when
    None), less ``offset``; CheckpointError naming the tensor if a value is not finite."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    data = found.data(tensor)
    rows = data.reshape(-1, data.shape[-1])
    out = torch.empty((rows.shape[0], tensor.shape[-1]), dtype=dtype)
    target = np.arange(rows.shape[0]) if order is None else np.argsort(order)  # where each stored row goes
    step = max(1, BLOCK_BYTES // (4 * tensor.shape[-1]))
    qtype = GGMLQuantizationType(tensor.type_id)
    for start in range(0, rows.shape[0], step):
        try:
            block = dequantize(rows[start:start + step], qtype).astype(np.float32, copy=False)
        except NotImplementedError:
            raise CheckpointError(f"{found.path}: tensor {tensor.name} is stored as {tensor.type_name}, which the "
                                  "gguf package cannot dequantize; convert the model to another type (Q8_0, Q4_K_M) "
                                  "with llama.cpp.") from None
        if offset:
            block = block - offset
        elif not block.flags.writeable:  # float32 tensors are views of the mapped file
            block = block.copy()
        if not np.isfinite(block).all():
            raise CheckpointError(f"{found.path}: tensor {tensor.name} holds NaN or infinite values; the file is "
                                  "damaged: download it again.")
        out[torch.from_numpy(target[start:start + step])] = torch.from_numpy(block).to(dtype)
    return out.reshape(tensor.shape)


def load_gguf(path: str | Path, dtype: str = "float32") -> LLMTranslator:
    """A ready translator for a GGUF file at ``dtype`` (CheckpointError with a clear message otherwise)."""
    path = Path(path)
    model = read_model(path)
    found, cfg = model.found, model.cfg
    arch, kv_heads = architecture(found), LLMArch.from_dict(cfg.arch).kv_heads
    tensors = {}
    for name, tensor in found.tensors.items():
        order = row_order(arch, name, tensor.shape[0], cfg.heads, kv_heads)
        tensors[model.names[name]] = dequantized(found, tensor, TORCH_DTYPES[dtype], order, value_offset(arch, name))
    network = build_loaded(path, cfg, tensors, dtype)
    meta = {"name": str(found.metadata.get("general.name") or path.stem), "path": str(path),
            "imported_from": f"GGUF file ({', '.join(found.type_counts())})", "generation": {}}
    return LLMTranslator(network, model.tokenizer, model.template, model.specials, meta,
                         f"{path} (tokenizer.chat_template)")
