"""The NAACL 2003 word-alignment shared task's formats (Mihalcea & Pedersen 2003), in which the English-French
Hansards (447 pairs) and Romanian-English (248) test sets are distributed: gold links one per line,
``sentence position_L1 position_L2 [S|P] [confidence]`` (positions from 1; 0 is NULL in the "nullalign" files; a
missing S/P means sure; a sentence without links has no line), all sentences in one file, and text lines
``<s snum=0001> words </s>``. Read here into the set reader's raw links (``goldset``), which decides from a gold
file's first line which of the two gold formats it is in. Torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from attnviz.engine.errors import InputError

FORM = "'sentence position_L1 position_L2 [S|P] [confidence]'"
NAME = "NAACL 2003 (one link per line)"
# Numbers short enough to be sentence and word numbers: a line of thousands of digits is refused, not int()-ed.
_LINE = re.compile(r"(?P<sent>\d{1,9})\s+(?P<a>\d{1,6})\s+(?P<b>\d{1,6})(?:\s+(?P<kind>[SsPp]))?"
                   r"(?:\s+(?P<conf>\d{1,9}(?:\.\d{0,9})?|\.\d{1,9}))?", re.ASCII)
_SNUM = re.compile(r"<s\s+snum\s*=\s*\"?(?P<id>[^\s>\"]{1,20})\"?\s*>(?P<text>.*)</s>")
RawLink = tuple[int, int, bool]


def is_link_line(line: str) -> bool:
    """Whether ``line`` is a NAACL 2003 link line (a pharaoh line ``1-2 3p4`` never is)."""
    return _LINE.fullmatch(line.strip()) is not None


def sentence_key(raw: str) -> str:
    """A sentence id as the gold file and the text name it: ``0001`` and ``1`` are the same sentence. Only ASCII
    digits are a number (``²`` and ``٣`` pass ``isdigit`` but are no sentence number: they stay a name)."""
    return str(int(raw)) if raw.isascii() and raw.isdigit() else raw


def _shown(line: str) -> str:
    line = line.strip()
    return repr(line if len(line) <= 60 else line[:40] + "...")


def strip_sentence_tags(path: str, lines: list[str]) -> tuple[list[str], list[str] | None]:
    """``<s snum=ID> words </s>`` lines -> (words, ids), when the file's first line is one; else (lines, None)."""
    if not lines or not lines[0].lstrip().startswith("<s"):
        return lines, None
    texts, ids = [], []
    for number, line in enumerate(lines, 1):
        match = _SNUM.fullmatch(line.strip())
        if match is None:
            raise InputError(f"{path}, line {number}: not a sentence line '<s snum=ID> words </s>': {_shown(line)} "
                             "(line 1 is one, so every line must be; give plain lines of words instead)")
        texts.append(match["text"])
        ids.append(sentence_key(match["id"]))
    seen: dict[str, int] = {}
    for number, key in enumerate(ids, 1):
        if key in seen:
            raise InputError(f"{path}, line {number}: sentence id {key} was already used on line {seen[key]}; each "
                             "<s snum=...> names one sentence")
        seen[key] = number
    return texts, ids


@dataclass
class NaaclLinks:
    """Raw links per pair (as written, L1 position first), the file line of each, and the NULL links dropped."""

    links: list[list[RawLink]]
    lines: list[list[int]]
    null_links: int = 0


def read_links(path: str, lines: list[str], keys: list[str], first: int, text_files: str,
               numbered: str) -> NaaclLinks:
    """The links of a NAACL 2003 gold file whose ``lines`` name the sentences ``keys`` (one per pair, in order).
    ``first`` is the line the format was recognised on; ``numbered`` says how the text numbers its sentences."""
    index = {key: i for i, key in enumerate(keys)}
    out = NaaclLinks([[] for _ in keys], [[] for _ in keys])
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        match = _LINE.fullmatch(line.strip())
        if match is None:
            raise InputError(f"{path}, line {number}: not a NAACL 2003 link line: {_shown(line)} (expected {FORM}, "
                             f"positions from 1; line {first} is in that format, so every line must be)")
        key = sentence_key(match["sent"])
        if key not in index:
            raise InputError(f"{path}, line {number}: sentence {match['sent']} is not in {text_files} ({numbered}); "
                             "check that the gold file belongs to this text")
        a, b = int(match["a"]), int(match["b"])
        if a == 0 or b == 0:  # a link to NULL ("nullalign" files): not a word of either side
            out.null_links += 1
            continue
        pair = index[key]
        out.links[pair].append((a, b, (match["kind"] or "S").upper() == "S"))
        out.lines[pair].append(number)
    return out
