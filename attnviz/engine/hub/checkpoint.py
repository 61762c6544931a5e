"""attnviz's own checkpoint file as a registered format: a ``.safetensors`` file whose header holds the model's
settings, vocabularies and tokenizers (``engine.checkpoints``). It is the fallback format for files: any file no
other format claims is read as one, and its reader says what is wrong with it (not safetensors, no attnviz
metadata, a damaged header...).

A checkpoint written from a converted LLM folder (``attnviz convert``) holds its tokenizer, chat template and
instruction too, and loads through ``hub.llm_weights``; every other one through ``engine.translator.load_checkpoint``.
Describing a checkpoint reads its header alone, without torch; ``examine`` also builds the model on torch's meta
device to check the tensor index against it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.engine.checkpoints.card import card_from_metadata, checkpoint_card, stored_parameters
from attnviz.engine.checkpoints.header import read_header
from attnviz.engine.checkpoints.memory import DTYPES
from attnviz.engine.checkpoints.parts import checkpoint_parts
from attnviz.engine.config import DEFAULT_KIND
from attnviz.engine.errors import ConfigError
from attnviz.engine.hub.parsed import once
from attnviz.engine.hub.registry import FolderFormat, Inspection, LoadPlan, register
from attnviz.engine.kinds import ModelKind, get_kind

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

_header = once(read_header)  # planning a load and the load read the header once (``hub.parsed``)


def _kind(meta: dict[str, Any]) -> ModelKind | None:
    """A checkpoint's model kind, or None when its metadata names none the registry knows (the loader says why)."""
    model = meta.get("model")
    try:
        return get_kind(str(model.get("kind", DEFAULT_KIND))) if isinstance(model, dict) else None
    except ConfigError:
        return None


def converted_llm(meta: dict[str, Any]) -> bool:
    """Whether a checkpoint is a converted LLM folder, read by ``hub.llm_weights`` rather than ``load_checkpoint``
    (an LLM built over attnviz's own vocabulary, with no prompt, loads as any model)."""
    kind = _kind(meta)
    return kind is not None and kind.reads_prompt and "prompt" in meta


def plan_load(path: Path) -> LoadPlan:
    """The header's dtype, parameter count and kind; the load itself checks the rest, and says what is wrong."""
    meta, index = _header(path)
    stored = meta["dtype"] if meta.get("dtype") in DTYPES else "float32"
    return LoadPlan(stored, stored_parameters(index), _kind(meta))


def examine(path: Path) -> Inspection:
    """The card and every check that reads no weight's value: the header, every metadata check translate makes
    (vocabularies, tokenizers, language tags), the tensor index against the model its config builds (on the meta
    device: the tensors' names need the model)."""
    from attnviz.engine.translator import check_index  # torch: the model on the meta device

    meta, index = read_header(path)
    if not converted_llm(meta):
        checkpoint_parts(path, meta, index)
    card = card_from_metadata(meta, stored_parameters(index), str(path))
    check_index(path, card.config, index)
    return Inspection(card, (f"{path.name}: header, metadata (settings, vocabularies, tokenizers, language tags), "
                             "tensors against the model config: names, shapes, offsets, model size on the meta "
                             "device",))


def load(path: Path, dtype: str) -> Translator:
    from attnviz.engine.translator import load_checkpoint  # torch: only when a model is loaded

    meta, _ = _header(path)
    if converted_llm(meta):
        from attnviz.engine.hub.llm_weights import load_llm_checkpoint

        return load_llm_checkpoint(path, dtype)
    return load_checkpoint(path, dtype)


CHECKPOINT = register(FolderFormat(
    name="attnviz-safetensors",
    title="attnviz checkpoint (.safetensors)",
    recognises=lambda path: True,  # any file no other format claims: the reader says what is wrong with it
    inspect=None,
    load=load,
    reads="file",
    suffixes=(".safetensors",),
    fallback=True,
    examine=examine,
    plan_load=plan_load,
    card=checkpoint_card,
))
