"""The standard every imported model folder meets, whatever its format: the rules a checkpoint's header meets
(``engine.checkpoints.schema``), applied to a folder's own files before anything is built.

A folder format (``engine.hub``) reads its JSON files with ``read_json``/``read_object`` (a regular file of sane
size, nesting at most ``MAX_DEPTH`` deep, finite numbers only, so no RecursionError or OverflowError reaches the
caller), checks the settings it maps onto a ``ModelConfig`` with ``check_fields`` (the header's types and
``MODEL_LIMITS``, named by the folder's own field names, so a size bomb is refused before any tensor exists), its
token ids with ``check_ids`` and its SentencePiece models with ``check_sentencepiece``, and says in a
``WeightPlan`` which tensors its config implies. ``check_weight_file`` compares that plan with the weights file's
index (names, shapes, offsets, truncation) without reading a value; ``check_shapes`` does the same for tensors
already read. Torch-free: ``attnviz info`` and the model picker run these checks before torch has loaded.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnviz.engine.checkpoints.header import read_index
from attnviz.engine.checkpoints.schema import MAX_DEPTH, check_model_settings, depth, open_regular
from attnviz.engine.errors import CheckpointError

MAX_JSON_BYTES = 64 * 1024 * 1024  # a real vocab.json is ~1.5 MB; a larger JSON file is damaged or hostile
MIN_PIECES = 16  # fewer ordinary pieces than the letters of any alphabet cannot spell a language's text
AGAIN = "download the model folder again"
FOLDER_FILE = f"a model folder's file; {AGAIN}"


class _NotFinite(str):
    """Where a JSON file gives NaN, Infinity or a number too large for a float (1e400): kept as its text so the
    message can name the field, then refused."""


def _finite_float(text: str) -> float | _NotFinite:
    value = float(text)
    return value if math.isfinite(value) else _NotFinite(text)


def _first_not_finite(value: Any) -> tuple[str, str] | None:
    """(the field, its text) of the first non-finite number in a parsed value (iterative: depth is checked first)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, _NotFinite):
            return where or "(the whole file)", str(item)
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return None


def read_json(path: Path) -> Any:
    """A folder's JSON file, checked as a checkpoint's header is: CheckpointError naming the file (and the field,
    for a bad number) for anything unreadable: not a regular file, over ``MAX_JSON_BYTES``, bad bytes or syntax,
    NaN/Infinity or a number too large for a float or too long for an int, nesting deeper than ``MAX_DEPTH``."""
    with open_regular(path, FOLDER_FILE) as f:
        raw = f.read(MAX_JSON_BYTES + 1)
    return parse_json(path, raw)


def parse_json(path: Path | str, raw: bytes) -> Any:
    """``read_json``'s checks of JSON bytes that ``path`` names (a file, or a checkpoint's stored file)."""
    if len(raw) > MAX_JSON_BYTES:
        raise CheckpointError(f"{path} is larger than {MAX_JSON_BYTES // 2**20} MiB, far beyond any model's; "
                              f"it is damaged or not this model's file: {AGAIN}.")
    not_finite: list[str] = []  # filled by the parser, so a file without such numbers is not walked again

    def constant(text: str) -> _NotFinite:
        not_finite.append(text)
        return _NotFinite(text)

    def number(text: str) -> float | _NotFinite:
        value = _finite_float(text)
        return constant(text) if isinstance(value, _NotFinite) else value

    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=constant, parse_float=number)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).splitlines()[0][:200]
        raise CheckpointError(f"{path} cannot be read as JSON ({reason}); {AGAIN}.") from None
    if depth(value) > MAX_DEPTH:
        raise CheckpointError(f"{path} cannot be read as JSON (nested too deeply: more than {MAX_DEPTH} levels); "
                              f"{AGAIN}.")
    bad = _first_not_finite(value) if not_finite else None
    if bad:
        raise CheckpointError(f"{path}: field {bad[0][:60]!r} is {bad[1][:40]}, but it must be a finite number; fix "
                              f"it, or {AGAIN}.")
    return value


def read_bytes(path: Path, limit: int = MAX_JSON_BYTES) -> bytes:
    """A folder's binary file (a tokenizer model) of at most ``limit`` bytes, from a regular file only."""
    with open_regular(path, FOLDER_FILE) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise CheckpointError(f"{path} is larger than {limit // 2**20} MiB, far beyond any model's; it is damaged "
                              f"or not this model's file: {AGAIN}.")
    return data


def read_object(path: Path) -> dict[str, Any]:
    """``read_json`` of a file that must hold a JSON object (a settings file, a vocabulary)."""
    value = read_json(path)
    if not isinstance(value, dict):
        raise CheckpointError(f"{path} holds {_a(value)}, not a JSON object; it is damaged or not this model's "
                              f"file: {AGAIN}.")
    return value


def _a(value: Any) -> str:
    return {list: "a list", str: "a string", bool: "true/false", int: "a number", float: "a number"}.get(
        type(value), "null" if value is None else type(value).__name__)


def check_fields(path: Path, settings: Mapping[str, Any], names: Mapping[str, str]) -> None:
    """``settings`` (ModelConfig field -> value as the file gives it) meet the checkpoint header's rules (types,
    finite numbers, ``MODEL_LIMITS``); a message names ``path`` and the file's own field (``names``: ModelConfig
    field -> the file's name for it)."""
    try:
        check_model_settings(path, dict(settings), dict(names))
    except CheckpointError as exc:
        raise CheckpointError(f"{exc} Fix it in {path.name}, or {AGAIN}.") from None


def unverifiable_settings(path: Path, config: Mapping[str, Any], settings: Mapping[str, Any], title: str,
                          activations: Collection[str]) -> tuple[str, ...]:
    """Check the settings of ``config`` (a folder's config.json) that its weights' shapes cannot confirm, as far as
    anything can: the head count against ``head_dim`` when the file gives one (heads x head_dim = d_model), the
    activation against the ones ``title`` models use (``activations``). Returns what stays unchecked, in words, for
    ``attnviz info``'s "not checked": a head count that divides d_model, the activation, the embedding scale."""
    heads, d_model, activation = settings["heads"], settings["d_model"], settings["activation"]
    head_dim = config.get("head_dim")
    if head_dim is not None:
        if type(head_dim) is not int or head_dim * heads != d_model:
            raise CheckpointError(f"{path}: field 'head_dim' is {head_dim!r:.40}, but {heads} heads of it must make "
                                  f"d_model {d_model} (heads x head_dim); the config disagrees with itself. Fix it "
                                  f"in {path.name}, or {AGAIN}.")
    if activation not in activations:
        raise CheckpointError(f"{path}: field 'activation_function' is {activation!r:.40}, but {title} models use "
                              f"{' or '.join(map(repr, sorted(activations)))}; the weights cannot tell which is "
                              f"right, and the wrong one translates badly without a word. Fix it in {path.name}, or "
                              f"{AGAIN}.")
    unchecked = [] if head_dim is not None else [
        f"the number of attention heads ({path.name} says {heads}; the weights' shapes allow any count dividing "
        f"d_model {d_model}, and config.json gives no head_dim to check it against)"]
    unchecked.append(f"the activation ({activation!r}, one that {title} models use; the weights cannot confirm it)")
    unchecked.append(f"the embedding scale (scale_embedding {settings.get('scale_embedding')}; the weights cannot "
                     "confirm it)")
    return tuple(unchecked)


def check_ids(path: Path, ids: Mapping[str, Any], size: int) -> None:
    """Every token id (the file's field -> value) is a whole number naming a row of a ``size``-entry vocabulary."""
    for name, value in ids.items():
        if type(value) is not int or not 0 <= value < size:
            raise CheckpointError(f"{path}: field {name!r} is {value!r:.40}, but it must be a token id from 0 to "
                                  f"{size - 1} (the vocabulary has {size:,} entries). Fix it, or {AGAIN}.")


def check_number(path: Path, name: str, value: Any, low: float, high: float, whole: bool = True) -> None:
    """A setting the file gives as ``value`` is a number (a whole one when ``whole``) from ``low`` to ``high``."""
    number = type(value) is int or (not whole and type(value) is float)
    if not number or not low <= value <= high:
        kind = "a whole number" if whole else "a number"
        raise CheckpointError(f"{path}: field {name!r} is {value!r:.40}, but it must be {kind} from {low:,} to "
                              f"{high:,}. Fix it, or {AGAIN}.")


def load_sentencepiece(path: Path, proto: bytes) -> Any:
    """A ``sentencepiece.SentencePieceProcessor`` of ``proto`` (read from ``path``), or CheckpointError naming it."""
    import sentencepiece  # a C extension without torch; only when a folder is read

    sp = sentencepiece.SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(proto)
    except Exception:  # sentencepiece raises RuntimeError/OSError with its own text for a bad model
        raise CheckpointError(f"{path} is not a SentencePiece model (it cannot be read); {AGAIN}.") from None
    return sp


def check_sentencepiece(path: Path, proto: bytes, vocab: Collection[str]) -> None:
    """A SentencePiece model that loads, has ``MIN_PIECES`` ordinary pieces at least, and belongs with ``vocab``
    (most of its pieces have an id there): else every sentence would decode to ``<unk>``."""
    sp = load_sentencepiece(path, proto)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
              if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i))]
    if len(pieces) < MIN_PIECES:
        raise CheckpointError(f"{path} holds only {len(pieces)} piece(s): it cannot split a language's text (every "
                              f"word would be <unk>); it is not this model's tokenizer: {AGAIN}.")
    known = sum(piece in vocab for piece in pieces)
    if known * 2 < len(pieces):
        raise CheckpointError(f"{path}: only {known} of its {len(pieces):,} pieces are in the model's vocabulary; "
                              f"the tokenizer and the vocabulary do not belong together: {AGAIN}.")


@dataclass(frozen=True)
class WeightPlan:
    """The tensors a folder's config implies, under the weights file's own names."""

    path: Path  # the weights file
    required: Mapping[str, list[int]]  # name -> shape: each must be there with that shape
    optional: Mapping[str, list[int]] = field(default_factory=dict)  # read when there, with that shape
    either: tuple[tuple[str, ...], ...] = ()  # groups of optional names of which one at least must be there
    unused: Mapping[str, str] = field(default_factory=dict)  # names that may be there but are not read -> why


def check_shapes(plan: WeightPlan, shapes: Mapping[str, list[int]]) -> list[str]:
    """Refuse weights that miss a tensor the config implies, give one another shape, or hold one the config does
    not account for (a layer config.json leaves out would otherwise be dropped in silence); the notes say which
    tensors are there but not read, and why."""
    where = plan.path
    missing = [n for n in plan.required if n not in shapes]
    missing += [" or ".join(group) for group in plan.either if not any(n in shapes for n in group)]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise CheckpointError(f"{where} lacks {missing[0]}{more}, which config.json implies; the weights and "
                              f"config.json do not match: {AGAIN}.")
    for name, shape in shapes.items():
        wanted = plan.required.get(name, plan.optional.get(name))
        if wanted is None and name not in plan.unused:
            raise CheckpointError(f"{where} holds {name[:80]}, which config.json does not account for (a layer or "
                                  f"part it leaves out); fix config.json to describe these weights, or {AGAIN}.")
        if wanted is not None and list(shape) != list(wanted):
            raise CheckpointError(f"{where}: tensor {name[:80]} has shape {list(shape)}, but config.json implies "
                                  f"{list(wanted)}; the weights and config.json do not match: {AGAIN}.")
    return [f"{name} is not read: {plan.unused[name]}" for name in shapes if name in plan.unused]


def check_weight_file(plan: WeightPlan) -> tuple[list[str], list[str]]:
    """What can be checked of the weights without reading a value: for safetensors, the header's framing, every
    entry's dtype, shape and offsets (none overlapping, none past the end) and ``check_shapes``. Returns (what
    was checked, notes)."""
    if plan.path.suffix != ".safetensors":
        return [], [f"{plan.path.name}: tensor names and shapes are checked only when it is loaded (--check)"]
    _, index = read_index(plan.path)
    notes = check_shapes(plan, {name: entry["shape"] for name, entry in index.items()})
    size = os.stat(plan.path).st_size
    return [f"{plan.path.name}: {len(index)} tensors ({size / 2**20:,.1f} MiB) against config.json: names, "
            "shapes, offsets"], notes
