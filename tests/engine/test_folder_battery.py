"""Hostile folders for EVERY registered folder format: each format's sample folder (``tests.folder_samples``) is
damaged in every way a file can be (JSON nested deeply, not an object, cut off, not UTF-8, NaN/Infinity/1e400, size
bombs and out-of-range numbers in every numeric field, broken or empty tokenizer files, named pipes, truncated
weights, overlapping offsets, missing, extra or misshapen tensors, NaN weights), and each must be refused with one
line naming the file (and the field) by loading, ``attnviz info`` (values only with ``--check``) and ``attnviz
convert``, which then writes nothing; no traceback, no hang, no model. A format registered later gets the battery
as soon as it has a sample; one without a sample fails here."""

from __future__ import annotations

import json
import os
import shutil
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from attnviz.cli.main import main
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub import folder_formats
from attnviz.engine.loading import load_translator
from tests.folder_samples import SAMPLES

FORMATS = [f.name for f in folder_formats()]
# every format's sample, and the variants a format reads differently ("format/variant": M2M100's vocab.json)
VARIANTS = [name for name in SAMPLES if name.split("/")[0] in FORMATS and "/" in name]
HOSTILE_NUMBERS = {"Infinity": "Infinity", "-Infinity": "-Infinity", "NaN": "NaN", "1e400": "1e400",
                   "10^9": str(10**9), "2^62": str(2**62), "-1": "-1", "2.5": "2.5"}
# values a field legitimately takes, so not hostile there (transformers' length_penalty may be negative or a fraction)
LEGITIMATE = {("generation_config.json", "length_penalty"): {"-1", "2.5"},
              ("config.json", "rope_theta"): {"10^9", "2.5"}}  # any positive RoPE base is a valid one
FIELDS_PER_FILE = 16  # numeric fields tried in one JSON file (a vocabulary has thousands; its first ones stand in)
VALUES_ONLY = "values"  # a kind only a read of every weight finds: info passes it unless asked to --check


@pytest.fixture(scope="module", params=FORMATS + VARIANTS)
def sample(request, tmp_path_factory) -> Path:
    build = SAMPLES.get(request.param)
    assert build, (f"folder format {request.param!r} has no sample in tests/folder_samples.py: add one, so that the "
                   "hostile-folder battery covers it")
    folder = build(tmp_path_factory.mktemp(request.param.replace("/", "-")) / "opus-mt-de-en")
    load_translator(folder)  # the sample itself is valid
    return folder


def json_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix == ".json")


def weight_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix == ".safetensors")


def other_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix not in (".json", ".safetensors", ".bin"))


def numeric_fields(path: Path) -> list[str]:
    value = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(value, dict):
        return []
    return [k for k, v in value.items() if type(v) in (int, float)][:FIELDS_PER_FILE]


def with_raw_field(path: Path, field: str, raw: str) -> bytes:
    """The file with ``field``'s value replaced by ``raw`` JSON text (which json.dumps could not write)."""
    marker = "__hostile_value__"
    value = json.loads(path.read_text(encoding="utf-8"))
    value[field] = marker
    return json.dumps(value, ensure_ascii=False).replace(f'"{marker}"', raw).encode()


def edit_weights(path: Path, change: Callable[[dict[str, torch.Tensor]], None]) -> bytes:
    tensors = load_file(path)
    change(tensors)
    out = path.with_suffix(".tmp")
    save_file({k: v.contiguous() for k, v in tensors.items()}, out)
    data = out.read_bytes()
    out.unlink()
    return data


def overlapping(path: Path) -> bytes:
    """Two tensors of one size pointed at the same bytes."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    by_size: dict[tuple, str] = {}
    for name, entry in header.items():
        if name != "__metadata__":
            key = (entry["dtype"], tuple(entry["shape"]))
            if key in by_size:
                entry["data_offsets"] = header[by_size[key]]["data_offsets"]
                break
            by_size[key] = name
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data[8 + n:]


def _nan_first(tensors: dict[str, torch.Tensor]) -> None:
    name = next(k for k, v in sorted(tensors.items()) if v.is_floating_point() and v.numel() > 1)
    tensors[name].view(-1)[1] = float("nan")


def _drop_last(tensors: dict[str, torch.Tensor]) -> None:
    del tensors[sorted(tensors)[-1]]


def _add_extra(tensors: dict[str, torch.Tensor]) -> None:
    tensors["model.extra_layer.weight"] = torch.zeros(4, 4)


def _misshape(tensors: dict[str, torch.Tensor]) -> None:
    name = next(k for k, v in sorted(tensors.items()) if v.dim() == 2)
    tensors[name] = tensors[name].reshape(-1)


def cases(folder: Path) -> list[tuple[str, str, bytes | None, tuple[str, ...]]]:
    """(kind, file name, its hostile bytes or None for a named pipe, words the message must hold)."""
    out: list[tuple[str, str, bytes | None, tuple[str, ...]]] = []
    for path in json_files(folder):
        text = path.read_bytes()
        out += [("deep JSON", path.name, b"[" * 100_000 + b"]" * 100_000, ("nested too deeply",)),
                ("deep JSON the parser reads", path.name, b'{"a": ' + b"[" * 40 + b"]" * 40 + b"}",
                 ("nested too deeply",)),
                ("JSON list", path.name, b"[1, 2, 3]", ("not a JSON object",)),
                ("cut-off JSON", path.name, text[:len(text) // 2], ("cannot be read as JSON",)),
                ("not UTF-8", path.name, b"\xff\xfe" + text, ("cannot be read as JSON",)),
                ("huge integer literal", path.name, b'{"a": ' + b"7" * 5000 + b"}", ("cannot be read as JSON",))]
        for field in numeric_fields(path):
            out += [(f"{field} = {label}", path.name, with_raw_field(path, field, raw), (field,))
                    for label, raw in HOSTILE_NUMBERS.items() if label not in LEGITIMATE.get((path.name, field), ())]
    for path in other_files(folder):
        out += [("garbage", path.name, b"\x00 not this file \xff" * 16, ()), ("empty", path.name, b"", ())]
    for path in weight_files(folder):
        data = path.read_bytes()
        out += [("truncated weights", path.name, data[:-64], ("truncated",)),
                ("cut inside header", path.name, data[:40], ("truncated",)),
                ("overlapping offsets", path.name, overlapping(path), ("overlap",)),
                ("missing tensor", path.name, edit_weights(path, _drop_last), ("lacks",)),
                ("unaccounted tensor", path.name, edit_weights(path, _add_extra), ("model.extra_layer.weight",)),
                ("misshapen tensor", path.name, edit_weights(path, _misshape), ("has shape",)),
                (VALUES_ONLY, path.name, edit_weights(path, _nan_first), ("NaN",))]
    out += [("named pipe", p.name, None, ()) for p in sorted(folder.iterdir())]
    return out


def _refused_by_loading(folder: Path, name: str, words: tuple[str, ...], pipe: bool) -> str | None:
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            load_translator(folder)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - the test reports whatever escaped
            outcome.append(exc)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive():
        if pipe:
            with open(folder / name, "wb"):
                pass
        return "hangs"
    exc = outcome[0]
    if not isinstance(exc, CheckpointError):
        return "loads (no error)" if exc is None else f"raises {type(exc).__name__}: {exc}"
    message = str(exc)
    named = name in message or (pipe and str(folder) in message)
    if "\n" in message or not named or not all(w in message for w in words):
        return f"message {message!r} should be one line naming {name} and {words}"
    return None


def _cli_refuses(folder: Path, tmp_path: Path, kind: str, capsys) -> str | None:
    out = tmp_path / "converted.safetensors"
    info = main(["info", str(folder)])
    checked = main(["info", "--check", str(folder)])
    converted = main(["convert", str(folder), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    expected_info = 0 if kind == VALUES_ONLY else 1
    if (info, checked, converted) != (expected_info, 1, 1) or out.exists():
        return f"info/info --check/convert exit {info}/{checked}/{converted}, wrote a file: {out.exists()}"
    if len(err) != 2 + expected_info or any("Traceback" in line for line in err):
        return f"stderr should hold one line per refusal: {err}"
    return None


def test_every_hostile_folder_is_refused_with_one_line_everywhere(sample, tmp_path, capsys):
    failures, count = [], 0
    for kind, name, data, words in cases(sample):
        folder = tmp_path / f"case{count}" / sample.name
        shutil.copytree(sample, folder)
        count += 1
        (folder / name).unlink()
        if data is None:
            os.mkfifo(folder / name)
        else:
            (folder / name).write_bytes(data)
        problem = _refused_by_loading(folder, name, words, data is None)
        if problem is None and data is not None:
            problem = _cli_refuses(folder, tmp_path, kind, capsys)
        if problem:
            failures.append(f"{name}: {kind}: {problem}")
        shutil.rmtree(folder.parent)
    assert count > 100 and not failures, "\n".join(failures)
