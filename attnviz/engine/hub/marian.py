"""The MarianMT (OPUS-MT) folder format, as the Hugging Face Hub lays a folder out: registered with ``engine.hub``.

A folder is Marian's when its ``config.json`` says ``model_type`` marian (or cannot be read, so that reading it
says why). Describing one (its ``ModelCard``) reads ``config.json``, the vocabularies and the SentencePiece models
(``engine.hub.marian_files``) and the weights' shapes from the safetensors header, without torch; loading one maps
its weights onto attnviz's Transformer (kind ``marian``) in ``engine.hub.marian_weights``, imported only then.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from attnviz.engine.checkpoints.card import ModelCard, card_from_metadata
from attnviz.engine.checkpoints.header import read_index
from attnviz.engine.hub.marian_files import MODEL_TYPE, folder_parts, holds, model_config, model_type
from attnviz.engine.hub.registry import FolderFormat, register

if TYPE_CHECKING:  # what loading returns; importing it would import torch
    from attnviz.engine.translator import Translator


def _recognises(folder: Path) -> bool:
    return (folder / "config.json").is_file() and model_type(folder) in (MODEL_TYPE, None)


def _identify(folder: Path) -> str | None:
    """A Hugging Face folder of another architecture says which (its config.json's model_type)."""
    return holds(model_type(folder)) if (folder / "config.json").is_file() else None


def _weight_shapes(folder: Path) -> dict[str, list[int]]:
    """Tensor shapes from a safetensors header (no tensor data read); empty for a ``.bin`` file."""
    path = folder / "model.safetensors"
    if not path.is_file():
        return {}
    _, index = read_index(path)
    return {k: v["shape"] for k, v in index.items()}


def marian_card(folder: Path) -> ModelCard:
    """A card for a Marian folder, without torch: what the model picker and ``attnviz info`` show."""
    config, src_vocab, _, tgt_vocab, _, src_spec, tgt_spec = folder_parts(folder)
    shared = bool(config.get("share_encoder_decoder_embeddings", True))
    cfg = model_config(config, len(src_vocab), len(tgt_vocab), shared, bool(config.get("tie_word_embeddings", True)))
    shapes = _weight_shapes(folder)
    parameters = sum(math.prod(s) for k, s in shapes.items() if "embed_positions" not in k)
    meta = {"name": folder.resolve().name, "model": cfg.to_dict(), "src_vocab": src_vocab.to_list(),
            "tgt_vocab": tgt_vocab.to_list(), "src_tokenizer": src_spec.to_dict(), "tgt_tokenizer": tgt_spec.to_dict()}
    return card_from_metadata(meta, parameters, str(folder))


def _load(folder: Path) -> Translator:
    from attnviz.engine.hub.marian_weights import load_marian  # torch: only when a folder is loaded

    return load_marian(folder)


MARIAN_FOLDER = register(FolderFormat(
    name="hf-marian",
    title="MarianMT folder (OPUS-MT, from the Hugging Face Hub)",
    recognises=_recognises,
    describe=marian_card,
    load=_load,
    identify=_identify,
))
