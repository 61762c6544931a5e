"""Refusing unusable corpora before training: binary lines, and splits left with no pairs.

``read_lines`` calls ``check_line`` on every decoded line, so a binary file that happens to decode as UTF-8 (NUL
bytes, runs of control bytes) is named with its line number instead of being trained on. ``check_prepared`` runs
after tokenizing: a training or validation split with no usable pair (empty files, every pair filtered out, a
wrong column or tokenizer) is refused with the files it came from, instead of "training" zero steps or crashing
in the first evaluation.
"""

from __future__ import annotations

import os
from pathlib import Path

from attnviz.engine.errors import DataError

CONTROL_SHARE = 0.25  # more control characters than this in a line of 4+ characters reads as binary data


def check_line(path: str | os.PathLike, number: int, text: str) -> None:
    """Refuse a line that is binary data rather than text."""
    if "\x00" in text:
        raise DataError(f"{path}, line {number}: contains NUL bytes; this is binary data, not a text corpus.")
    controls = sum(1 for c in text if (ord(c) < 32 and c not in "\t\r\n\f\v") or 127 <= ord(c) < 160)
    if len(text) >= 4 and controls > CONTROL_SHARE * len(text):
        raise DataError(f"{path}, line {number}: {controls} of its {len(text)} characters are control characters; "
                        "this is binary data, not a text corpus.")


def split_files(spec, data_dir: str | os.PathLike | None, split: str) -> list[str]:
    """The files a corpus ``split`` ("train", "val") is read from, for messages."""
    from attnviz.engine.corpus.reader import _multi30k_file

    data_dir = Path(data_dir) if data_dir is not None else Path(".")
    if spec.kind == "multi30k":
        return [str(_multi30k_file(data_dir, split, lang)) for lang in (spec.src_lang, spec.tgt_lang)]
    if spec.kind in ("tatoeba", "lines"):
        return [str(data_dir / spec.file)]
    return [str(p) for p in spec.paths.get(split, [])]


def check_prepared(spec, data_dir, read: dict[str, int], usable: dict[str, int]) -> None:
    """``read``: pairs read per split; ``usable``: pairs left after tokenizing. Refuse an empty train or val."""
    for split in ("train", "val"):
        if usable.get(split, 0) > 0:
            continue
        files = " and ".join(split_files(spec, data_dir, split)) or f"the {split} split"
        if read.get(split, 0) == 0:
            why = "no sentence pairs at all (the files are empty, or every line was blank or filtered out)"
        else:
            why = (f"{read[split]:,} pair(s), but none is left after tokenizing (check the tokenizer settings and "
                   "that each line has text on both sides)")
        raise DataError(f"{files}: the {split} split has {why}; nothing to train on. Check the files "
                        "and the corpus settings.")
