"""Opening a model by its path, in any registered format (``engine.hub``): attnviz's checkpoint file, an imported
model's folder.

``load_translator(path)`` gives a ready ``Translator``; ``read_card(path)`` its ``ModelCard`` without torch (what
the model picker shows); ``inspect_model(path)`` the card with what was checked without reading a weight's value
(``attnviz info``). A path goes to the registered format that recognises it (a clear error naming the known
formats when none does). This module names no format, and holds every folder format to the same standard: the plan
a format's ``inspect`` returns is checked against the weights file's index, and the model's size on torch's meta
device, before the format loads anything; the loaded model's values are checked after, whatever the format did. A
file format checks its own file (``examine``, ``plan_load``); every format's load is refused before a value is read
when it would not fit in memory. Describing needs no torch: the translator module is imported only when a model is
loaded.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from attnviz.engine.checkpoints.folder import check_weight_file
from attnviz.engine.checkpoints.header import read_index
from attnviz.engine.checkpoints.memory import (
    AUTO,
    check_device_choice,
    check_fits,
    resolve_dtype,
    run_bytes,
    stored_dtype,
)
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub import FolderFormat, FolderPlan, format_of
from attnviz.engine.hub.names import model_path
from attnviz.engine.hub.parsed import parsed_once
from attnviz.engine.hub.registry import NOT_CHECKED, Inspection, LoadPlan
from attnviz.engine.kinds import ModelKind

if TYPE_CHECKING:
    from attnviz.engine.checkpoints.card import ModelCard
    from attnviz.engine.translator import Translator

IN_ANOTHER_SHARD = "in another shard"  # how a sharded folder's plan marks the tensors of the other shards
NOT_CHECKED_SIZE = "the model's size in memory (--check builds it)"
__all__ = ["Inspection", "check_model", "inspect_model", "load_translator", "read_card"]


def _folder_plan(fmt: FolderFormat, folder: Path, size: bool = True) -> tuple[FolderPlan, list[str], list[str]]:
    """A folder's plan, its model's size checked on the meta device (``size``; it needs torch), then its weights'
    index against the plan; the card says the dtype the weights are stored at (safetensors' index)."""
    assert fmt.inspect is not None, f"folder format {fmt.name} inspects nothing"
    plan = fmt.inspect(folder)
    if size:
        from attnviz.engine.translator import check_model_size  # torch: the model is built on the meta device

        check_model_size(folder, plan.card.config)  # before the format allocates anything
    checked: list[str] = []
    notes: list[str] = []
    for weights in (plan.weights, *plan.more_weights):
        more_checked, more_notes = check_weight_file(weights)
        twice = [n.split(" is not read")[0] for n in more_notes if IN_ANOTHER_SHARD in n]
        if twice:  # which copy is meant is unsaid: loading one of them in silence could load the wrong one
            raise CheckpointError(f"{weights.path} holds {twice[0][:80]}, which the folder's index puts in another "
                                  "shard: the same tensor is in two shards; download the model folder again.")
        checked, notes = checked + more_checked, notes + more_notes
    if plan.weights.path.suffix == ".safetensors":
        plan = replace(plan, card=replace(plan.card, dtype=stored_dtype(read_index(plan.weights.path)[1])))
    return plan, checked, notes


def load_translator(path: str | os.PathLike[str], dtype: str = AUTO, device: str = "cpu") -> Translator:
    """A model file or an imported model's folder, in any registered format, as a ready ``Translator`` running at
    ``dtype`` (one of ``DTYPE_CHOICES``; ``auto``: see ``resolve_dtype``) on ``device`` (one of ``DEVICE_CHOICES``;
    ``cuda``: a decoder-only LLM on the GPU, see ``translator.resolve_device``), refused before any weight is read if
    it would not fit in the available memory, or the device cannot run it (``CheckpointError`` with a clear message
    for that and anything else). The weights are read into the CPU's memory, checked, then moved to the device."""
    check_device_choice(device)
    path = model_path(path)
    fmt = format_of(path)
    with parsed_once():  # planning the load and the load read the model's files once
        plan = _load_plan(fmt, path)
        kind = plan.kind
        run = resolve_dtype(dtype, plan.stored_dtype, keep_stored=kind is not None and kind.stored_precision)
        card = plan.card
        running = None if card is None else (lambda d: run_bytes(card.kind, card.config, d))
        check_fits(path, plan.parameters, run, running)
        where = _device(device, kind)
        translator = fmt.load(path, run)
    if plan.card is not None:
        _check_loaded(path, plan.card, translator)
        translator.metadata["dtype"] = plan.card.dtype  # what the card says the weights are stored as
    return _moved(translator, where)


def _load_plan(fmt: FolderFormat, path: Path) -> LoadPlan:
    """A file format's own plan; a folder's from its format's inspection, its model's size checked on the meta
    device and its weights' index against the plan, before the format allocates anything."""
    if fmt.plan_load is not None:
        return fmt.plan_load(path)
    plan, _, _ = _folder_plan(fmt, path)
    return LoadPlan(plan.card.dtype, plan.card.parameters, plan.card.kind, plan.card)


def _device(device: str, kind: ModelKind | None) -> str:
    """The device ``device`` resolves to for ``kind`` ("cpu" needs no torch), refused before anything is read."""
    if device == "cpu":
        return device
    from attnviz.engine.translator import resolve_device  # torch: whether it sees a GPU

    return resolve_device(device, kind).type


def _moved(translator: Translator, device: str) -> Translator:
    """``translator`` with its model on ``device``, which ``_device`` already resolved and checked."""
    if device != "cpu":
        translator.model.to(device)
    return translator


def _check_loaded(folder: Path, card: ModelCard, translator: Translator) -> None:
    """What every format's load must give: the model its inspection described. Its values were checked once, as
    they were read (``checkpoints.weights.read_weights``, ``hub.llm_weights``: inf and NaN refused, the tensor
    named; ``tests/engine/test_folder_battery.py`` holds every format to it), so they are not read again here."""
    sizes = (len(translator.src_vocab), len(translator.tgt_vocab))
    if translator.config != card.config or sizes != (card.src_vocab_size, card.tgt_vocab_size):
        raise CheckpointError(f"{folder}: the loaded model differs from what its files describe (its format's "
                              "reader is inconsistent); report it, with the folder's config.json.")


def read_card(path: str | os.PathLike[str]) -> ModelCard:
    """The card of a model file or an imported model's folder, in any registered format, without torch."""
    path = model_path(path)
    fmt = format_of(path)
    if fmt.card is not None:
        return fmt.card(Path(path))
    assert fmt.inspect is not None, f"format {fmt.name} describes nothing"
    return fmt.inspect(Path(path)).card


def inspect_model(path: str | os.PathLike[str]) -> Inspection:
    """The card and every check that reads no weight's value: a file format's own (a checkpoint's header and its
    tensor index against the model its config builds on the meta device); a folder's files and its weights' index
    against the tensors its format says the config implies (without torch)."""
    path = model_path(path)
    fmt = format_of(path)
    if fmt.examine is not None:
        return fmt.examine(path)
    plan, checked, notes = _folder_plan(fmt, path, size=False)  # torch-free: the plan names every tensor and shape
    return Inspection(plan.card, tuple(checked), tuple(notes), (NOT_CHECKED, NOT_CHECKED_SIZE, *plan.unchecked))


def check_model(path: str | os.PathLike[str], dtype: str = AUTO) -> Inspection:
    """``inspect_model`` and then every weight read and checked (finite), as loading at ``dtype`` does."""
    path = model_path(path)
    inspection = inspect_model(path)
    load_translator(path, dtype)
    unverifiable = tuple(n for n in inspection.not_checked if n not in (NOT_CHECKED, NOT_CHECKED_SIZE))
    return Inspection(inspection.card, (*inspection.checked, "model size on the meta device, values: every weight "
                                        "read, all finite"), inspection.notes, unverifiable)
