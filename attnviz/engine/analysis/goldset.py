"""Word-alignment test sets as they are published (Vilar et al.'s German-English, the English-French Hansards, the
Romanian-English set): sentence pairs and their gold links, read once for the command line and the Analysis tab.

The text is one pair per line, ``source ||| target``, or two line-aligned files; it is already tokenised, so a
sentence's words are its space-separated fields (trailing spaces ignored). A gold line holds the pair's links:
``i-j`` (sure), ``ipj`` or ``i?j`` (possible), also ``i-j-S``/``i-j-P``; source index first. The published sets
count words from 1; ``one_based`` says so, or, left ``None``, the numbering is detected when the file allows it (an
index 0 only 0-based numbering has; an index equal to its sentence's word count only 1-based numbering has) and
refused with how to choose when it does not. ``reverse`` reads a set that lists the model's target side first (the
Hansards list English first; a French-to-English model reads them reversed): its gold links are ``target-source``
and a ``|||`` file is ``target ||| source``. Links are returned 0-based as (source word, target word) of the model's
direction. The NAACL 2003 shared task's formats (the Hansards and Romanian-English sets: one link per line,
``<s snum=...>`` text lines) are read too (``naacl``); a gold file's format is detected from its first line and
said. Torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from attnviz.engine.analysis import naacl
from attnviz.engine.corpus.reader import read_lines
from attnviz.engine.errors import DataError, InputError

Links = set[tuple[int, int]]

# One gold link: i-j (sure, or -S/-P after it), ipj or i?j (possible); numbers short enough to be words (a number of
# thousands of digits is refused as a link, not passed to int()).
_LINK = re.compile(r"(?P<a>\d{1,6})(?:(?P<p>[pP?])(?P<b1>\d{1,6})|-(?P<b2>\d{1,6})(?:-(?P<kind>[SsPp]))?)", re.ASCII)
LINK_FORMS = "i-j (sure), ipj or i?j (possible), i-j-S or i-j-P"
SEPARATOR = "|||"
RawLink = tuple[int, int, bool]  # (first index, second index, sure) as written
PHARAOH = "one line per pair (i-j, ipj)"


def parse_links(line: str) -> list[RawLink]:
    """One gold line -> its links as written; anything not a link is refused, never guessed (``0-0-X``)."""
    out = []
    for item in line.split():
        match = _LINK.fullmatch(item)
        if match is None:
            shown = item if len(item) <= 40 else item[:20] + "..."
            raise ValueError(f"not a link: {shown!r} (expected {LINK_FORMS})")
        sure = match["p"] is None and (match["kind"] or "S").upper() == "S"
        out.append((int(match["a"]), int(match["b1"] or match["b2"]), sure))
    return out


def parse_pharaoh(line: str) -> tuple[Links, Links]:
    """One gold line, numbered as written -> (sure, possible) links; possible includes sure."""
    links = parse_links(line)
    return {(a, b) for a, b, sure in links if sure}, {(a, b) for a, b, _ in links}


@dataclass(frozen=True)
class GoldSet:
    """Sentence pairs as the set's words, in the model's direction, with their gold links (0-based) if given."""

    sources: tuple[tuple[str, ...], ...]
    targets: tuple[tuple[str, ...], ...]
    sure: tuple[frozenset[tuple[int, int]], ...] | None = None  # (source word, target word) per pair
    possible: tuple[frozenset[tuple[int, int]], ...] | None = None  # includes the sure links
    files: dict[str, str] = field(default_factory=dict)  # text or src/tgt, and gold
    reverse: bool = False
    indexing: str | None = None  # how the gold file numbers words: "0-based" or "1-based"
    indexing_reason: str = ""  # "--one-based", "--zero-based" or what the detection saw
    gold_format: str | None = None  # PHARAOH or naacl.NAME
    gold_format_reason: str = ""  # the line the format was recognised on
    null_links: int = 0  # NAACL links to position 0 (NULL), not scored
    sentence_ids: bool = False  # the text named its sentences (<s snum=...>), which the gold file's ids follow

    def gold(self) -> list[tuple[Links, Links]] | None:
        if self.sure is None or self.possible is None:
            return None
        return [(set(s), set(p)) for s, p in zip(self.sure, self.possible, strict=True)]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"files": dict(self.files), "pairs": len(self.sources), "reverse": self.reverse,
                               "sentence_ids": "<s snum=...>" if self.sentence_ids else "line numbers"}
        if self.sure is not None:  # the link counts are the alignment's (sure_links, possible_links)
            out.update(gold_format=self.gold_format, gold_format_decided_by=self.gold_format_reason,
                       indexing=self.indexing, indexing_decided_by=self.indexing_reason,
                       null_links_ignored=self.null_links)
        return out

    def describe(self) -> str:
        """One line saying how the gold file was read, as the command line and the Analysis tab report it."""
        nulls = f"; {self.null_links} links to NULL (position 0) ignored" if self.null_links else ""
        return (f"gold: {self.gold_format} ({self.gold_format_reason}); {self.indexing} ({self.indexing_reason})"
                f"{nulls}")


def _lines(path: str, keep: int = 0) -> list[str]:
    """A set file's lines, without the blank lines at its end (the German-English set ends with one) beyond the
    first ``keep`` (a gold file's last pairs may have no links)."""
    try:
        lines = read_lines(path)
    except DataError as exc:
        if "UTF-8" not in str(exc):
            raise
        raise InputError(f"{exc} Convert the file to UTF-8 first (the German-English set is Latin-1): iconv -f "
                         "latin1 -t utf-8 FILE > FILE.utf8") from None
    while len(lines) > keep and not lines[-1].strip():
        lines.pop()
    return lines


def _words_of_text(path: str, reverse: bool) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    pairs = []
    for number, line in enumerate(_lines(path), 1):
        parts = line.split(SEPARATOR)
        if len(parts) != 2:
            raise InputError(f"{path}, line {number}: expected one pair 'source {SEPARATOR} target', found "
                             f"{len(parts) - 1} '{SEPARATOR}'; give two line-aligned files with --src/--tgt instead")
        first, second = (tuple(side.split()) for side in parts)
        pairs.append((second, first) if reverse else (first, second))
    return pairs


def _words_of_files(src: str, tgt: str) -> tuple[list[tuple[tuple[str, ...], tuple[str, ...]]], list[str] | None]:
    """The pairs of two line-aligned files, plain or ``<s snum=ID> words </s>`` lines, and the sentence ids."""
    (sources, src_ids), (targets, tgt_ids) = (naacl.strip_sentence_tags(path, _lines(path)) for path in (src, tgt))
    if len(sources) != len(targets):
        raise InputError(f"{src} has {len(sources)} lines but {tgt} has {len(targets)}: a set's two sides have one "
                         f"line per pair (line {min(len(sources), len(targets)) + 1} has no partner)")
    if src_ids is not None and tgt_ids is not None:
        for number, (a, b) in enumerate(zip(src_ids, tgt_ids, strict=True), 1):
            if a != b:
                raise InputError(f"{tgt}, line {number}: sentence {b}, but line {number} of {src} is sentence {a}; "
                                 "the two sides must list the same sentences in the same order")
    pairs = [(tuple(s.split()), tuple(t.split())) for s, t in zip(sources, targets, strict=True)]
    return pairs, src_ids or tgt_ids


def _check_sides(pairs, where: dict[str, str]) -> None:
    for number, (src, tgt) in enumerate(pairs, 1):
        for side, words in (("source", src), ("target", tgt)):
            if not words:
                raise InputError(f"{where[side]}, line {number}: the {side} side is empty; a set keeps its pairs one "
                                 "to one with the gold lines, so give it its words")


def _decide_indexing(path: str, links: list[list[RawLink]], pairs, one_based: bool | None, fmt: str) -> tuple[int, str]:
    """(offset to subtract, how it was decided): from the flag, or from what only one numbering can have."""
    if fmt == naacl.NAME:
        if one_based is False:
            raise InputError(f"{path}: the NAACL 2003 format numbers words from 1 (0 is NULL); --zero-based does not "
                             "apply to it (leave the numbering to detection or give --one-based)")
        return 1, "--one-based" if one_based else "the NAACL 2003 format counts positions from 1"
    if one_based is not None:
        return (1, "--one-based") if one_based else (0, "--zero-based")
    zero = top = None
    for number, (line, (src, tgt)) in enumerate(zip(links, pairs, strict=True), 1):
        for i, j, _ in line:
            if zero is None and 0 in (i, j):
                zero = number
            if top is None and (i == len(src) or j == len(tgt)):
                top = number
    if zero is not None and top is not None:
        raise InputError(f"{path}: line {zero} has a word number 0 (0-based) and line {top} a number equal to its "
                         "sentence's word count (1-based): check --reverse (the file may list the target side "
                         "first), or say the numbering with --one-based or --zero-based")
    if zero is not None:
        return 0, f"detected: line {zero} has a word number 0, which only 0-based numbering has"
    if top is not None:
        return 1, f"detected: line {top} numbers a sentence's last word by its word count, which only 1-based has"
    if not any(links):
        return 0, "no links to number"
    raise InputError(f"{path}: cannot tell whether words are numbered from 0 or from 1 (no number 0 and none equal "
                     "to a sentence's word count); say it with --one-based (as the published sets) or --zero-based")


@dataclass
class _GoldFile:
    """A gold file's raw links per pair (as written), the file line of each link, and how it was read."""

    links: list[list[RawLink]]
    lines: list[list[int]]
    fmt: str
    fmt_reason: str
    null_links: int = 0


def _gold_links(path: str, gold: _GoldFile, pairs, offset: int, reverse: bool, how: str):
    sure_all, possible_all = [], []
    sides = ("target", "source") if reverse else ("source", "target")
    for pair, (line, numbers, (src, tgt)) in enumerate(zip(gold.links, gold.lines, pairs, strict=True), 1):
        sure, possible = set(), set()
        for (a, b, is_sure), number in zip(line, numbers, strict=True):
            i, j = (b, a) if reverse else (a, b)
            for side, index, words in (("source", i, src), ("target", j, tgt)):
                if not offset <= index < len(words) + offset:
                    named = f"pair {pair}'s link {a} {b}" if gold.fmt == naacl.NAME else f"link {a}-{b}"
                    raise InputError(
                        f"{path}, line {number}: {named} names {side} word {index}, but the {side} side has "
                        f"{len(words)} words ({'1' if offset else '0'}-based: {how}; the file lists the {sides[0]} "
                        f"first{' with --reverse' if reverse else ''}); check --reverse and --one-based")
            link = (i - offset, j - offset)
            possible.add(link)
            if is_sure:
                sure.add(link)
        sure_all.append(frozenset(sure))
        possible_all.append(frozenset(possible))
    return tuple(sure_all), tuple(possible_all)


def _read_gold(path: str, keys: list[str] | None, n_pairs: int, text_files: str) -> _GoldFile:
    """A gold file in either format, the format decided by its first non-blank line."""
    lines = _lines(path, keep=n_pairs)
    first = next((n for n, line in enumerate(lines, 1) if line.strip()), None)
    if first is not None and naacl.is_link_line(lines[first - 1]):
        numbered = "sentences named by their <s snum=...>" if keys else f"sentences numbered 1 to {n_pairs} by line"
        found = naacl.read_links(path, lines, keys or [str(n) for n in range(1, n_pairs + 1)], first, text_files,
                                 numbered)
        return _GoldFile(found.links, found.lines, naacl.NAME, f"detected: line {first} is {naacl.FORM}",
                         found.null_links)
    out = []
    for number, line in enumerate(lines, 1):
        try:
            out.append(parse_links(line))
        except ValueError as exc:
            hint = f"; or, one link per line, {naacl.FORM} (NAACL 2003)" if line.split()[0].isdigit() else ""
            raise InputError(f"{path}, line {number}: {exc}{hint}") from None
    if len(lines) != n_pairs:
        raise InputError(f"{path} has {len(lines)} lines but {text_files} has {n_pairs} sentence pairs: the gold "
                         "file needs one line per pair, in the same order (an empty line for a pair without links), "
                         f"or one link per line as {naacl.FORM} (NAACL 2003)")
    reason = f"detected: line {first} holds i-j links" if first else "empty: no links"
    return _GoldFile(out, [[n] * len(links) for n, links in enumerate(out, 1)], PHARAOH, reason)


def read_set(text: str | None = None, src: str | None = None, tgt: str | None = None, gold: str | None = None, *,
             one_based: bool | None = None, reverse: bool = False, limit: int = 0) -> GoldSet:
    """Read a test set: ``text`` (``src ||| tgt`` lines) or ``src`` with ``tgt``, and optionally its ``gold`` links.

    ``limit`` keeps the first pairs (after the files were checked whole). Refuses, with file and line, a missing
    ``|||``, an empty side, line counts that differ, a malformed link and a link past its sentence's words.
    """
    if (text is None) == (src is None or tgt is None) or (text is not None and (src or tgt)):
        raise InputError("give the sentence pairs as --text PAIRS ('source ||| target' per line) or as --src with "
                         "--tgt, not both")
    keys = None
    if text is not None:
        pairs, files, where = _words_of_text(text, reverse), {"text": text}, {"source": text, "target": text}
    else:
        assert src is not None and tgt is not None
        pairs, keys = _words_of_files(src, tgt)
        files, where = {"src": src, "tgt": tgt}, {"source": src, "target": tgt}
    _check_sides(pairs, where)
    return with_gold(pairs, gold, files, one_based=one_based, reverse=reverse, limit=limit, keys=keys)


def with_gold(pairs: list[tuple[tuple[str, ...], tuple[str, ...]]], gold: str | None, files: dict[str, str], *,
              one_based: bool | None = None, reverse: bool = False, limit: int = 0,
              keys: list[str] | None = None) -> GoldSet:
    """A set of ``pairs`` (the set's words, model's direction) read from ``files``, with the links of ``gold``;
    ``keys`` are the sentences' ids when the text names them (``<s snum=...>``), which NAACL gold lines follow."""
    cut = pairs[:limit] if limit else pairs
    sources, targets = tuple(p[0] for p in cut), tuple(p[1] for p in cut)
    if gold is None:
        return GoldSet(sources, targets, files=files, reverse=reverse, sentence_ids=keys is not None)
    found = _read_gold(gold, keys, len(pairs), " and ".join(files.values()))
    if not any(found.links):
        why = f"only {found.null_links} links to NULL" if found.null_links else "every line is empty"
        raise InputError(f"{gold}: the gold set has no links ({why}), so there is nothing to score alignments "
                         "against; give the gold file that holds the links")
    oriented = [[(b, a, s) for a, b, s in line] for line in found.links] if reverse else found.links
    offset, how = _decide_indexing(gold, oriented, pairs, one_based, found.fmt)  # detection counts each side
    sure, possible = _gold_links(gold, found, pairs, offset, reverse, how)
    n = len(cut)
    return GoldSet(sources, targets, sure[:n], possible[:n], {**files, "gold": gold}, reverse,
                   "1-based" if offset else "0-based", how, found.fmt, found.fmt_reason, found.null_links,
                   keys is not None)
