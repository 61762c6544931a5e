"""What the fairseq folder formats (``engine.hub.m2m100``, ``engine.hub.mbart``) tell the registry: a folder's card
and weight plan without torch, and the ``FolderFormat`` entry each registers; the files are read by
``engine.hub.fairseq_files``, the weights loaded by ``engine.hub.fairseq_weights`` (torch, imported only when a folder
is loaded)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from attnviz.engine.checkpoints.card import card_from_metadata
from attnviz.engine.checkpoints.folder import unverifiable_settings
from attnviz.engine.hub.fairseq_files import config_settings, folder_parts, weight_plan
from attnviz.engine.hub.marian_files import model_type as read_model_type
from attnviz.engine.hub.marian_files import weights_file
from attnviz.engine.hub.registry import FolderFormat, FolderPlan

if TYPE_CHECKING:  # what loading returns; importing it would import torch
    from attnviz.engine.translator import Translator


def fairseq_plan(folder: Path, model_type: str) -> FolderPlan:
    """A folder's card and weight plan, without torch: what the model picker and ``attnviz info`` show (the
    parameters counted as attnviz holds them: one embedding table, an output bias)."""
    parts = folder_parts(folder, model_type)
    plan = weight_plan(parts, weights_file(folder))
    parameters = sum(math.prod(s) for s in plan.required.values()) + len(parts.names) * (parts.cfg.d_model + 1)
    family = parts.family
    unchecked = unverifiable_settings(folder / "config.json", parts.config, config_settings(parts.config, family),
                                      family.title, (family.activation,))
    return FolderPlan(card_from_metadata(parts.metadata(), parameters, str(folder)), plan, unchecked=unchecked)


def fairseq_format(model_type: str, name: str, title: str) -> FolderFormat:
    """The folder format of ``model_type`` folders: recognised by config.json's model_type, inspected here, loaded
    by ``engine.hub.fairseq_weights`` (torch, imported only when a folder is loaded)."""
    def load(folder: Path, dtype: str) -> Translator:
        from attnviz.engine.hub.fairseq_weights import load_fairseq

        return load_fairseq(folder, model_type, dtype)

    def recognises(folder: Path) -> bool:
        return (folder / "config.json").exists() and read_model_type(folder) == model_type

    return FolderFormat(name=name, title=title, recognises=recognises,
                        inspect=lambda folder: fairseq_plan(folder, model_type), load=load)
