"""Corpora: finding the data folder, reading parallel text, the reference filters and splits, and refusing
unusable corpora before training.

Readers return lists of (source, target) strings; tokenization happens later with the recipe's ``TokenizerSpec``.
Problems are reported with the file name and line number: misaligned files, lines without the expected TAB,
undecodable bytes, binary data that happens to decode as UTF-8 (NUL bytes, runs of control bytes: ``check_line``
runs on every line read). Empty pairs are dropped and counted (``Splits.dropped``), never silently kept.
``check_prepared`` runs after tokenizing: a training or validation split with no usable pair (empty files, every
pair filtered out, a wrong column or tokenizer) is refused with the files it came from, instead of "training" zero
steps or crashing in the first evaluation.
"""

from __future__ import annotations

import gzip
import os
import random
import sys
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from attnviz.engine.errors import ConfigError, DataError
from attnviz.engine.text.tokenize import clean_text, normalize_tatoeba

Pair = tuple[str, str]
ENG_PREFIXES = ("i am ", "i m ", "he is", "he s ", "she is", "she s ", "you are", "you re ", "we are", "we re ",
                "they are", "they re ")
CORPUS_KINDS = ("multi30k", "tatoeba", "lines", "files")
DOWNLOAD_HINT = "Download the {name} corpus into it, or choose a data folder that has it."
CONTROL_SHARE = 0.25  # more control characters than this in a line of 4+ characters reads as binary data


def default_data_dir() -> Path:
    """The per-user data folder by platform convention."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share"))
    return base / "attnviz" / "data"


def resolve_data_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The folder given, else ``ATTNVIZ_DATA``, else the user's data folder."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("ATTNVIZ_DATA")
    return Path(env) if env else default_data_dir()


class PreparationStopped(Exception):  # noqa: N818 (a stop asked for, not an error)
    """A training run was asked to stop while its data was being read or prepared: nothing was trained or saved."""


STOP_EVERY_LINES = 1024  # lines read between two looks at a run's stop event


def check_line(path: str | os.PathLike, number: int, text: str) -> None:
    """Refuse a line that is binary data rather than text."""
    if "\x00" in text:
        raise DataError(f"{path}, line {number}: contains NUL bytes; this is binary data, not a text corpus.")
    controls = sum(1 for c in text if (ord(c) < 32 and c not in "\t\r\n\f\v") or 127 <= ord(c) < 160)
    if len(text) >= 4 and controls > CONTROL_SHARE * len(text):
        raise DataError(f"{path}, line {number}: {controls} of its {len(text)} characters are control characters; "
                        "this is binary data, not a text corpus.")


def read_lines(path: str | os.PathLike, stop: threading.Event | None = None) -> list[str]:
    """All lines of a UTF-8 text file, gzipped or plain, without their line endings (nor a byte order mark at its
    start, which editors on Windows write and which is no part of the first line's text)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file.")
    opener = gzip.open if path.suffix == ".gz" else open
    lines = []
    try:
        with opener(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                try:
                    lines.append(raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n"))
                except UnicodeDecodeError:
                    raise DataError(f"{path}, line {number}: not valid UTF-8 text.") from None
                check_line(path, number, lines[-1])
                if stop is not None and number % STOP_EVERY_LINES == 0 and stop.is_set():
                    raise PreparationStopped
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: cannot be read ({exc}).") from None
    return lines


def read_parallel(src_path: str | os.PathLike, tgt_path: str | os.PathLike,
                  stop: threading.Event | None = None) -> tuple[list[Pair], int]:
    """Two line-aligned files -> (pairs, number of pairs dropped because a side was empty)."""
    src, tgt = read_lines(src_path, stop), read_lines(tgt_path, stop)
    if len(src) != len(tgt):
        raise DataError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: line-aligned files must "
                        f"have the same number of lines (line {min(len(src), len(tgt)) + 1} has no partner).")
    return _drop_empty(zip(src, tgt))


def read_tsv(path: str | os.PathLike, src_column: int = 0, tgt_column: int = 1,
             stop: threading.Event | None = None) -> tuple[list[Pair], int]:
    """A TSV of pairs (extra columns, such as Tatoeba's attribution, are ignored)."""
    pairs = []
    for number, line in enumerate(read_lines(path, stop), 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) <= max(src_column, tgt_column):
            raise DataError(f"{path}, line {number}: expected at least {max(src_column, tgt_column) + 1} "
                            f"TAB-separated columns, found {len(cols)}: {line[:60]!r}")
        pairs.append((cols[src_column], cols[tgt_column]))
    return _drop_empty(pairs)


def _drop_empty(pairs) -> tuple[list[Pair], int]:
    kept, dropped = [], 0
    for s, t in pairs:
        s, t = clean_text(s), clean_text(t)
        if s and t:
            kept.append((s, t))
        else:
            dropped += 1
    return kept, dropped


@dataclass(frozen=True)
class CorpusSpec:
    """Where a recipe's sentence pairs come from and how they are filtered and split."""

    # "multi30k" (given splits), "tatoeba" (one TSV, random split), "lines" (one text per line for a language
    # model, random split; pairs have an empty source) or "files" (explicit paths)
    kind: str
    src_lang: str
    tgt_lang: str
    file: str = ""  # tatoeba: the TSV in the data folder, English first ("eng-fra.txt", "deu.txt"); lines: the text
    eng_prefixes: bool = False  # reference B's filter: English starts with "i am", "he is", ...
    max_words: int = 0  # keep pairs with fewer words than this on both sides (0 = no limit)
    val_fraction: float = 0.2
    split_seed: int = 1234
    test_split: str = "test_2016_flickr"
    limit: int = 0  # keep only the first N pairs of every split (quick experiments and tests); 0 = all
    paths: dict[str, list[str]] = field(default_factory=dict)  # files: split -> [src path, tgt path] or [tsv]

    def __post_init__(self) -> None:
        # checked where a recipe is made (a preset, --set, a checkpoint's recipe, the Train tab), not where the
        # files are read an hour later
        if not isinstance(self.paths, dict):
            raise ConfigError(f"corpus.paths must map each split to its files, not {type(self.paths).__name__}")
        for split, paths in self.paths.items():
            if not (isinstance(paths, list) and len(paths) in (1, 2) and all(isinstance(p, str) and p for p in paths)):
                raise ConfigError(f"corpus.paths[{split!r}] must list a source and a target file, or one TAB-separated "
                                  f"file, not {str(paths)[:60]}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def expected_files(self) -> list[str]:
        if self.kind == "multi30k":
            return [f"multi30k_{split}.{lang}.gz" for split in ("train", "val", self.test_split)
                    for lang in (self.src_lang, self.tgt_lang)]
        if self.kind in ("tatoeba", "lines"):
            return [self.file]
        return [p for paths in self.paths.values() for p in paths]


@dataclass
class Splits:
    train: list[Pair]
    val: list[Pair]
    test: list[Pair] = field(default_factory=list)
    dropped: int = 0

    def get(self, name: str) -> list[Pair]:
        if name not in ("train", "val", "test"):
            raise DataError(f"unknown split {name!r}; use train, val or test")
        return getattr(self, name)


def _keep_tatoeba(eng: str, other: str, spec: CorpusSpec) -> bool:
    eng_n, other_n = normalize_tatoeba(eng), normalize_tatoeba(other)
    if spec.max_words and (len(eng_n.split()) >= spec.max_words or len(other_n.split()) >= spec.max_words):
        return False
    return not spec.eng_prefixes or eng_n.startswith(ENG_PREFIXES)


def _multi30k_file(data_dir: Path, split: str, lang: str) -> Path:
    for name in (f"multi30k_{split}.{lang}.gz", f"multi30k_{split}.{lang}", f"{split}.{lang}.gz", f"{split}.{lang}"):
        if (data_dir / name).exists():
            return data_dir / name
    return data_dir / f"multi30k_{split}.{lang}.gz"


def load_splits(spec: CorpusSpec, data_dir: str | os.PathLike, stop: threading.Event | None = None) -> Splits:
    """Read, filter and split a corpus; a missing file names every file expected and how to get them. A set
    ``stop`` ends the reading within ``STOP_EVERY_LINES`` lines (``PreparationStopped``)."""
    splits = _load_all(spec, Path(data_dir), stop)
    if spec.limit:
        splits.train, splits.val, splits.test = (s[: spec.limit] for s in (splits.train, splits.val, splits.test))
    return splits


def load_split(spec: CorpusSpec, data_dir: str | os.PathLike, split: str) -> list[Pair]:
    """One split's pairs. Multi30k's test and val have files of their own, so evaluating them does not need (or
    read) the training files; a corpus split at random is read whole, as the split depends on every pair."""
    if spec.kind != "multi30k":
        return load_splits(spec, data_dir).get(split)
    if split not in ("train", "val", "test"):
        raise DataError(f"unknown split {split!r}; use train, val or test")
    data_dir = Path(data_dir)
    name = spec.test_split if split == "test" else split
    paths = [_multi30k_file(data_dir, name, spec.src_lang), _multi30k_file(data_dir, name, spec.tgt_lang)]
    _require_files(data_dir, paths, download_name(spec))
    pairs = read_parallel(paths[0], paths[1])[0]
    return pairs[: spec.limit] if spec.limit else pairs


def _load_all(spec: CorpusSpec, data_dir: Path, stop: threading.Event | None) -> Splits:
    if spec.kind == "multi30k":
        files = {s: (_multi30k_file(data_dir, s, spec.src_lang), _multi30k_file(data_dir, s, spec.tgt_lang))
                 for s in ("train", "val", spec.test_split)}
        _require_files(data_dir, [p for pair in files.values() for p in pair], download_name(spec))
        read = {s: read_parallel(*paths, stop=stop) for s, paths in files.items()}
        return Splits(read["train"][0], read["val"][0], read[spec.test_split][0], sum(d for _, d in read.values()))
    if spec.kind == "tatoeba":
        path = data_dir / spec.file
        _require_files(data_dir, [path], download_name(spec))
        pairs, dropped = read_tsv(path, stop=stop)  # English first
        pairs = [(other, eng) for eng, other in pairs if _keep_tatoeba(eng, other, spec)]
        if spec.src_lang == "en":
            pairs = [(eng, other) for other, eng in pairs]
        return _random_split(pairs, spec, dropped)
    if spec.kind == "lines":
        path = data_dir / spec.file
        _require_files(data_dir, [path], download_name(spec))
        lines = [clean_text(line) for line in read_lines(path, stop)]
        return _random_split([("", line) for line in lines if line], spec, sum(1 for line in lines if not line))
    if spec.kind == "files":
        read = {}
        for split, paths in spec.paths.items():
            read[split] = (read_parallel(paths[0], paths[1], stop) if len(paths) == 2
                           else read_tsv(paths[0], stop=stop))
        if "train" not in read or "val" not in read:
            raise DataError("custom data needs at least a train and a val split (source and target files each)")
        return Splits(read["train"][0], read["val"][0], read.get("test", ([], 0))[0], sum(d for _, d in read.values()))
    raise DataError(f"unknown corpus kind {spec.kind!r}; use one of {CORPUS_KINDS}")


def _random_split(pairs: list[Pair], spec: CorpusSpec, dropped: int) -> Splits:
    order = list(range(len(pairs)))
    random.Random(spec.split_seed).shuffle(order)
    n_train = int(len(pairs) * (1 - spec.val_fraction))
    return Splits([pairs[i] for i in order[:n_train]], [pairs[i] for i in order[n_train:]], [], dropped)


def download_name(spec: CorpusSpec) -> str | None:
    """The ``attnviz data download`` name that provides a corpus, or None for the user's own files."""
    if spec.kind == "multi30k":
        return "multi30k"
    if spec.kind == "tatoeba":
        return "tatoeba-" + spec.file.split("-")[-1].split(".")[0]  # eng-fra.txt -> fra, deu.txt -> deu
    if spec.kind == "lines" and spec.file == "names.txt":
        return "names"
    return None


def missing_files(spec: CorpusSpec, data_dir: str | os.PathLike) -> list[str]:
    """The files of ``spec`` not found in ``data_dir`` (custom files: their own paths)."""
    data_dir = Path(data_dir)
    if spec.kind == "multi30k":
        return [f"multi30k_{s}.{lang}.gz" for s in ("train", "val", spec.test_split)
                for lang in (spec.src_lang, spec.tgt_lang)
                if not _multi30k_file(data_dir, s, lang).exists()]
    return [name for name in spec.expected_files() if not (data_dir / name).exists()]


def _require_files(data_dir: Path, paths: list[Path], name: str | None) -> None:
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        raise DataError(f"missing data in {data_dir}: {', '.join(missing)}. " + DOWNLOAD_HINT.format(name=name),
                        settings=("data_dir",), corpus=name)


def split_files(spec: CorpusSpec, data_dir: str | os.PathLike | None, split: str) -> list[str]:
    """The files a corpus ``split`` ("train", "val") is read from, for messages."""
    data_dir = Path(data_dir) if data_dir is not None else Path(".")
    if spec.kind == "multi30k":
        return [str(_multi30k_file(data_dir, split, lang)) for lang in (spec.src_lang, spec.tgt_lang)]
    if spec.kind in ("tatoeba", "lines"):
        return [str(data_dir / spec.file)]
    return [str(p) for p in spec.paths.get(split, [])]


def check_prepared(spec: CorpusSpec, data_dir: str | os.PathLike | None, read: dict[str, int],
                   usable: dict[str, int]) -> None:
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
