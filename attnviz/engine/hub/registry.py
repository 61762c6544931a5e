"""The model-format registry: one ``FolderFormat`` entry per way a model is held on disk: attnviz's own checkpoint
file (``hub.checkpoint``) and each kind of imported model folder (MarianMT, fairseq's NLLB/M2M/mBART, decoder-only
LLMs).

A format registers itself from its own module in this package (``register(FolderFormat(...))`` at import time); the
package's modules are discovered the first time anyone asks (an ``engine.plugins.Registry``, as the model kinds
are), so adding a format is adding a module here, plus its torch half in a ``<name>_weights`` module (and, where it
gives a Translator of its own, a ``<name>_translator`` one), which discovery never imports. Code elsewhere
(``engine.loading``, ``attnviz info`` and ``convert``, the app's open dialog) asks the registry (``format_of(path)``,
``folder_formats()``) and never names a format. The registry and the formats' own modules are torch-free: a format's
``load`` imports its weights module only when it is called, so describing a folder (its ``ModelCard``) needs no
torch, as describing a checkpoint does not.

A format reads a folder or a file (``reads``). A folder format describes a folder by its ``inspect`` and
``engine.loading`` runs the checks below; a file format checks its own file (``examine``: the card and what was
checked, for ``attnviz info``; ``plan_load``: what loading needs before a value is read). A ``fallback`` format is
asked last: attnviz's checkpoint reader takes any file no other format claims, and says what is wrong with it.

Every folder format is held to one standard (``engine.checkpoints.folder``): its ``inspect`` reads the folder's files
with the shared JSON reader and checks, and returns a ``FolderPlan`` (the card and the tensors its config implies),
which ``engine.loading`` checks against the weights file before anything is built, and its ``load`` reads the
weights through ``engine.checkpoints.weights``; the loader then checks the loaded model's values whatever the format
did.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from attnviz.engine.checkpoints.card import ModelCard
from attnviz.engine.checkpoints.folder import WeightPlan
from attnviz.engine.checkpoints.header import require_path
from attnviz.engine.errors import CheckpointError
from attnviz.engine.kinds import ModelKind
from attnviz.engine.plugins import Registry

if TYPE_CHECKING:  # what a format loads; importing it would import torch
    from attnviz.engine.translator import Translator

# a format's torch half (its weights' loading, ``_weights``; the Translator it gives, ``_translator``): imported by
# its ``load``, never by discovery
TORCH_HALVES = ("_weights", "_translator")


def _unknown(folder: Path) -> str | None:
    """A format that cannot say what a folder it does not read holds."""
    return None


@dataclass(frozen=True)
class FolderPlan:
    """What a format's ``inspect`` finds in a folder without reading a weight: its card and its weights' plan."""

    card: ModelCard
    weights: WeightPlan
    more_weights: tuple[WeightPlan, ...] = ()  # the other shards of a sharded folder, each checked the same way
    # settings that nothing in the folder can confirm (the head count when config.json gives no head_dim...), in
    # words for attnviz info's "not checked"
    unchecked: tuple[str, ...] = ()


NOT_CHECKED = "values (run with --check to read every weight)"  # what no inspection reads


@dataclass(frozen=True)
class Inspection:
    """A model's card and what was checked to give it, without reading a weight's value (``attnviz info``)."""

    card: ModelCard
    checked: tuple[str, ...]
    notes: tuple[str, ...] = ()
    not_checked: tuple[str, ...] = (NOT_CHECKED,)


@dataclass(frozen=True)
class LoadPlan:
    """What loading needs to know of a model before reading a weight's value: the dtype its weights are stored at,
    how many parameters it holds, its kind (None: the format's ``load`` says what is wrong) and, where the format
    describes it before loading, its card (the loaded model is checked against it)."""

    stored_dtype: str
    parameters: int
    kind: ModelKind | None
    card: ModelCard | None = None


@dataclass(frozen=True)
class FolderFormat:
    """Everything loading, ``attnviz info``/``convert`` and the app need to know about one folder format."""

    name: str  # how the registry knows it
    title: str  # what it is, in words, for menus and messages ("MarianMT folder (Hugging Face)")
    recognises: Callable[[Path], bool]  # whether a folder is laid out this way (cheap: names, a config's type)
    # a recognised folder's card and the tensors its config implies, every file but the weights read and checked
    # through engine.checkpoints.folder, without torch (CheckpointError naming the file and field if broken)
    inspect: Callable[[Path], FolderPlan] | None
    # a recognised folder as a ready Translator running at a dtype ("float32", "float16", "bfloat16": resolved by
    # engine.loading); imports torch when called, and builds its network with engine.checkpoints.assign.build_loaded
    load: Callable[[Path, str], Translator]
    # what a folder it does not recognise holds, when its family can tell ("holds a 'bert' model (config.json
    # model_type)"): the error for a folder no format reads then says what the folder is
    identify: Callable[[Path], str | None] = _unknown
    reads: Literal["folder", "file"] = "folder"
    fallback: bool = False  # asked after every other format that reads the same (a file no other format claims)
    # a file format's own checks: its card and what was checked (torch only where the file's checks need it)
    examine: Callable[[Path], Inspection] | None = None
    plan_load: Callable[[Path], LoadPlan] | None = None  # a file format's LoadPlan (torch-free, no value read)
    card: Callable[[Path], ModelCard] | None = None  # a file format's card, torch-free (a folder's: ``inspect``)
    suffixes: tuple[str, ...] = ()  # a file format's file names (".gguf"), for open dialogs' filters


_FORMATS: Registry[FolderFormat] = Registry(
    "folder format", "attnviz.engine.hub", lambda module: module != "registry" and not module.endswith(TORCH_HALVES))
register, unregister, registered = _FORMATS.register, _FORMATS.unregister, _FORMATS.registered


def all_formats() -> tuple[FolderFormat, ...]:
    """Every registered format, in registration order."""
    return tuple(_FORMATS.entries().values())


def folder_formats() -> tuple[FolderFormat, ...]:
    """The registered formats that read a model folder, in registration order."""
    return tuple(f for f in all_formats() if f.reads == "folder")


def file_formats() -> tuple[FolderFormat, ...]:
    """The registered formats that read a model file, in registration order."""
    return tuple(f for f in all_formats() if f.reads == "file")


def find_format(path: str | os.PathLike[str]) -> FolderFormat | None:
    """The registered format that recognises ``path`` (a folder or a file), a fallback format after the others;
    None when none does, or nothing is there."""
    path = Path(path)
    reads = "folder" if path.is_dir() else "file" if path.exists() else None  # a pipe or a device: a file
    formats = sorted((f for f in all_formats() if f.reads == reads), key=lambda f: f.fallback)
    return next((f for f in formats if f.recognises(path)), None)


def format_of(path: str | os.PathLike[str]) -> FolderFormat:
    """The format that recognises ``path``; CheckpointError saying what a folder holds, when a format can tell,
    and naming the folder formats this attnviz reads otherwise."""
    found = find_format(require_path(path))
    if found is not None:
        return found
    path = Path(path)
    known = "; ".join(f.title for f in folder_formats()) or "none"
    what = next((hint for f in folder_formats() if (hint := f.identify(path))), None)
    if what:
        raise CheckpointError(f"{path} {what}, which attnviz cannot open. It opens its own .safetensors checkpoints "
                              f"and these model folders: {known}.")
    raise CheckpointError(f"{path} is a folder; choose a .safetensors checkpoint file inside it, or a model folder "
                          f"of a kind attnviz imports: {known}.")
