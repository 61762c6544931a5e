"""Opening a model by its path: an attnviz checkpoint file, or an imported model's folder.

``load_translator(path)`` gives a ready ``Translator``; ``read_card(path)`` its ``ModelCard`` without torch (what
the model picker shows); ``inspect_model(path)`` the card with what was checked without reading a weight's value
(``attnviz info``). A folder goes to the registered folder format that recognises it (``engine.hub``; a clear error
naming the known formats when none does), a file is a checkpoint (``engine.translator.load_checkpoint``,
``engine.checkpoints.card.checkpoint_card``). This module names no format, and holds every format to the same
standard: the plan a format's ``inspect`` returns is checked against the weights file's index, and the model's size
on torch's meta device, before the format loads anything; the loaded model's values are checked after, whatever the
format did. Describing needs no torch: the translator module is imported only when a model is loaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from attnviz.engine.checkpoints.card import ModelCard, card_from_metadata, checkpoint_card, stored_parameters
from attnviz.engine.checkpoints.folder import check_weight_file
from attnviz.engine.checkpoints.header import read_header, read_index, require_path
from attnviz.engine.checkpoints.memory import (
    AUTO,
    DTYPES,
    check_device_choice,
    check_fits,
    resolve_dtype,
    stored_dtype,
)
from attnviz.engine.checkpoints.parts import checkpoint_parts
from attnviz.engine.config import DEFAULT_KIND
from attnviz.engine.errors import CheckpointError, ConfigError
from attnviz.engine.hub import FolderPlan, format_of
from attnviz.engine.hub.parsed import parsed_once
from attnviz.engine.kinds import ModelKind, get_kind

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

NOT_CHECKED = "values (run with --check to read every weight)"
NOT_CHECKED_SIZE = "the model's size in memory (--check builds it)"


@dataclass(frozen=True)
class Inspection:
    """A model's card and what was checked to give it (``attnviz info``)."""

    card: ModelCard
    checked: tuple[str, ...]
    notes: tuple[str, ...] = ()
    not_checked: tuple[str, ...] = (NOT_CHECKED,)


def _folder_plan(folder: Path, size: bool = True) -> tuple[FolderPlan, list[str], list[str]]:
    """A folder's plan, its model's size checked on the meta device (``size``; it needs torch), then its weights'
    index against the plan; the card says the dtype the weights are stored at (safetensors' index)."""
    plan = format_of(folder).inspect(folder)
    if size:
        from attnviz.engine.translator import check_model_size  # torch: the model is built on the meta device

        check_model_size(folder, plan.card.config)  # before the format allocates anything
    checked: list[str] = []
    notes: list[str] = []
    for weights in (plan.weights, *plan.more_weights):
        more_checked, more_notes = check_weight_file(weights)
        checked, notes = checked + more_checked, notes + [n for n in more_notes if "in another shard" not in n]
    if plan.weights.path.suffix == ".safetensors":
        plan = replace(plan, card=replace(plan.card, dtype=stored_dtype(read_index(plan.weights.path)[1])))
    return plan, checked, notes


def load_translator(path: str | os.PathLike[str], dtype: str = AUTO, device: str = "cpu") -> Translator:
    """A checkpoint file or an imported model's folder as a ready ``Translator`` running at ``dtype`` (one of
    ``DTYPE_CHOICES``; ``auto``: see ``resolve_dtype``) on ``device`` (one of ``DEVICE_CHOICES``; ``cuda``: a
    decoder-only LLM on the GPU, see ``translator.resolve_device``), refused before any weight is read if it would
    not fit in the available memory, or the device cannot run it (``CheckpointError`` with a clear message for that
    and anything else). The weights are read into the CPU's memory, checked, then moved to the device."""
    check_device_choice(device)
    if not require_path(path).is_dir():
        from attnviz.engine.translator import load_checkpoint  # torch: only when a model is loaded

        meta, index = read_header(path)
        kind = _kind(meta)
        run = resolve_dtype(dtype, meta["dtype"] if meta.get("dtype") in DTYPES else "float32",
                            keep_stored=kind is not None and kind.stored_precision)
        check_fits(path, stored_parameters(index), run)
        where = _device(device, kind)
        if _converted_llm(meta):  # a converted LLM folder: its tokenizer,
            # template and instruction are inside (an LLM built over attnviz's own vocabulary loads as any model)
            from attnviz.engine.hub.llm_weights import load_llm_checkpoint

            return _moved(load_llm_checkpoint(path, run), where)
        return _moved(load_checkpoint(path, run), where)
    folder = Path(path)
    with parsed_once():  # the inspection and the load read the folder's files once
        plan, _, _ = _folder_plan(folder)
        run = resolve_dtype(dtype, plan.card.dtype, keep_stored=plan.card.kind.stored_precision)
        check_fits(folder, plan.card.parameters, run)
        where = _device(device, plan.card.kind)
        translator = format_of(folder).load(folder, run)
    _check_loaded(folder, plan.card, translator)
    translator.metadata["dtype"] = plan.card.dtype  # what the card says the weights are stored as
    return _moved(translator, where)


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


def _converted_llm(meta: dict) -> bool:
    """Whether a checkpoint is a converted LLM folder, read by ``hub.llm_weights`` rather than ``load_checkpoint``."""
    kind = _kind(meta)
    return kind is not None and kind.reads_prompt and "prompt" in meta


def _kind(meta: dict) -> ModelKind | None:
    """A checkpoint's model kind, or None when its metadata names none the registry knows (the loader says why)."""
    model = meta.get("model")
    try:
        return get_kind(str(model.get("kind", DEFAULT_KIND))) if isinstance(model, dict) else None
    except ConfigError:
        return None


def _check_loaded(folder: Path, card: ModelCard, translator: Translator) -> None:
    """What every format's load must give: the model its inspection described. Its values were checked once, as
    they were read (``checkpoints.weights.read_weights``, ``hub.llm_weights``: inf and NaN refused, the tensor
    named; ``tests/engine/test_folder_battery.py`` holds every format to it), so they are not read again here."""
    sizes = (len(translator.src_vocab), len(translator.tgt_vocab))
    if translator.config != card.config or sizes != (card.src_vocab_size, card.tgt_vocab_size):
        raise CheckpointError(f"{folder}: the loaded model differs from what its files describe (its format's "
                              "reader is inconsistent); report it, with the folder's config.json.")


def read_card(path: str | os.PathLike[str]) -> ModelCard:
    """The card of a checkpoint file (from its header) or of an imported model's folder, without torch."""
    if Path(path).is_dir():
        return format_of(path).inspect(Path(path)).card
    return checkpoint_card(path)


def inspect_model(path: str | os.PathLike[str]) -> Inspection:
    """The card and every check that reads no weight's value: a checkpoint's header, its tensor index against the
    model its config builds (on the meta device: the tensors' names need the model); a folder's files and its
    weights' index against the tensors its format says the config implies (without torch)."""
    path = Path(path)
    if path.is_dir():  # torch-free: the format's plan names every tensor and shape
        plan, checked, notes = _folder_plan(path, size=False)
        return Inspection(plan.card, tuple(checked), tuple(notes), (NOT_CHECKED, NOT_CHECKED_SIZE, *plan.unchecked))
    from attnviz.engine.translator import check_index  # torch: the model on the meta device

    meta, index = read_header(path)
    if not _converted_llm(meta):  # every metadata check translate makes (vocabularies, tokenizers, tags)
        checkpoint_parts(path, meta, index)
    card = card_from_metadata(meta, stored_parameters(index), str(path))
    check_index(path, card.config, index)
    return Inspection(card, (f"{path.name}: header, metadata (settings, vocabularies, tokenizers, language tags), "
                             "tensors against the model config: names, shapes, offsets, model size on the meta "
                             "device",))


def check_model(path: str | os.PathLike[str], dtype: str = AUTO) -> Inspection:
    """``inspect_model`` and then every weight read and checked (finite), as loading at ``dtype`` does."""
    inspection = inspect_model(path)
    load_translator(path, dtype)
    unverifiable = tuple(n for n in inspection.not_checked if n not in (NOT_CHECKED, NOT_CHECKED_SIZE))
    return Inspection(inspection.card, (*inspection.checked, "model size on the meta device, values: every weight "
                                        "read, all finite"), inspection.notes, unverifiable)
