"""The MarianMT (OPUS-MT) folder format, as the Hugging Face Hub lays a folder out: registered with ``engine.hub``.

A folder is Marian's when its ``config.json`` says ``model_type`` marian (or cannot be read, so that reading it
says why). Inspecting one reads and checks ``config.json``, the vocabularies and the SentencePiece models
(``engine.hub.marian_files``) and says which tensors, under Hugging Face's ``MarianMTModel`` names, its config
implies (the ``WeightPlan`` that ``engine.loading`` checks the weights file against), without torch; loading one
maps its weights onto attnviz's Transformer (kind ``marian``) in ``engine.hub.marian_weights``, imported only then.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from attnviz.engine.checkpoints.card import card_from_metadata
from attnviz.engine.checkpoints.folder import read_json, unverifiable_settings
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub.families import holds
from attnviz.engine.hub.marian_files import (
    ACTIVATIONS,
    DEFAULTS,
    EMBEDDINGS,
    FIELDS,
    MODEL_TYPE,
    MarianParts,
    folder_parts,
    model_type,
    weight_plan,
    weights_file,
)
from attnviz.engine.hub.registry import FolderFormat, FolderPlan, register

if TYPE_CHECKING:  # what loading returns; importing it would import torch
    from attnviz.engine.translator import Translator

def _recognises(folder: Path) -> bool:
    return (folder / "config.json").exists() and model_type(folder) in (MODEL_TYPE, None)


def _identify(folder: Path) -> str | None:
    """A Hugging Face folder of another architecture says which (its config.json's model_type, and the family
    ``engine.hub.families`` names for it: T5/MADLAD, a decoder-only language model...)."""
    if not (folder / "config.json").exists():
        return None
    try:
        config = read_json(folder / "config.json")
    except CheckpointError:
        return holds(None)
    config = config if isinstance(config, dict) else {}
    return holds(config.get("model_type"), config.get("architectures"))


def marian_plan(folder: Path) -> FolderPlan:
    """A Marian folder's card and weight plan, without torch: what the model picker and ``attnviz info`` show."""
    return plan_of_parts(folder_parts(folder))


def plan_of_parts(parts: MarianParts) -> FolderPlan:
    """``marian_plan`` of a folder already read (``folder_parts``), so that it is parsed once."""
    folder = parts.folder
    plan = weight_plan(parts, weights_file(folder))
    parameters = sum(math.prod(s) for s in plan.required.values())
    parameters += sum(math.prod(plan.optional[n]) for n in plan.optional if n not in EMBEDDINGS)
    parameters += sum(math.prod(plan.optional[n]) for n in EMBEDDINGS[:1 if parts.cfg.share_embeddings else 0])
    meta = {"name": folder.resolve().name, "model": parts.cfg.to_dict(), "src_vocab": parts.src_vocab.to_list(),
            "tgt_vocab": parts.tgt_vocab.to_list(), "src_tokenizer": parts.src_spec.to_dict(),
            "tgt_tokenizer": parts.tgt_spec.to_dict(), "generation": parts.generation}
    settings = {name: parts.config.get(own, DEFAULTS.get(own)) for name, own in FIELDS.items()}
    unchecked = unverifiable_settings(folder / "config.json", parts.config, settings, "MarianMT", ACTIVATIONS)
    return FolderPlan(card_from_metadata(meta, parameters, str(folder)), plan, unchecked=unchecked)


def _load(folder: Path, dtype: str) -> Translator:
    from attnviz.engine.hub.marian_weights import load_marian  # torch: only when a folder is loaded

    return load_marian(folder, dtype)


MARIAN_FOLDER = register(FolderFormat(
    name="hf-marian",
    title="MarianMT folder (OPUS-MT, from the Hugging Face Hub)",
    recognises=_recognises,
    inspect=marian_plan,
    load=_load,
    identify=_identify,
))
