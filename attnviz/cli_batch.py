"""Batch translation for ``attnviz translate``: every input line gets exactly one output line.

Standard input is read as bytes and split into lines; each line is decoded on its own, so an undecodable line is
reported by number (with the offending byte in hex, never echoed raw) while every other line is translated. A line
the model cannot read (only control characters, NUL, a zero-width space...) gets an empty output line and a warning
naming its line number on stderr, or ``{"line": N, "error": ...}`` with ``--json``; blank lines stay blank with a
warning. ``translate_lines`` reports how many lines failed, and the command exits with status 1 when any did.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from attnviz.engine.errors import InputError


@dataclass
class Line:
    number: int  # 1-based
    text: str = ""
    error: str | None = None  # why this line cannot be translated
    src_tokens: list[str] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    output: str = ""
    warnings: list[str] = field(default_factory=list)
    translation: object = None  # the full Translation when attention is exported

    @property
    def blank(self) -> bool:
        return self.error is None and not self.text.strip()


def decode_line(number: int, raw: bytes) -> Line:
    try:
        return Line(number, raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return Line(number, error=f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at position {exc.start}); "
                                  "the line was not read")


def read_lines(sentences: list[str]) -> list[Line]:
    """The SENTENCE arguments, or the lines of standard input, decoded one by one."""
    if sentences:
        if any(not s.strip() for s in sentences):
            raise InputError("an empty sentence was given; pass text to translate, e.g. "
                             "attnviz translate -m MODEL \"Ein Hund rennt.\"")
        # argv holds undecodable bytes as surrogates: turn them back into bytes so they are reported, not echoed
        return [decode_line(i, s.encode("utf-8", "surrogateescape")) for i, s in enumerate(sentences, 1)]
    if sys.stdin is None or sys.stdin.isatty():
        raise InputError("no sentences: pass them as arguments or one per line on standard input")
    data = sys.stdin.buffer.read()
    raws = data.split(b"\n")
    if raws and raws[-1] == b"":
        raws.pop()
    lines = [decode_line(i, raw.removesuffix(b"\r")) for i, raw in enumerate(raws, 1)]
    if all(line.blank for line in lines):
        raise InputError("standard input has no text to translate (it is empty or only whitespace)")
    return lines


def translate_lines(translator, lines: list[Line], decode, attention: bool) -> None:
    """Fill in each line's tokens and output (or its error). With ``attention`` the search's own output (greedy or
    beam) is re-scored teacher-forced, so the printed translation is the same with and without it."""
    from attnviz.engine.decoding import step_limit
    from attnviz.engine.rescore import forced_translation

    todo = []
    for line in lines:
        if line.error is None and not line.blank:
            try:
                line.src_tokens, _, line.warnings = translator.prepare_source(line.text)
                todo.append(line)
            except InputError as exc:
                line.error = str(exc)
    limit = step_limit(translator.model, decode.max_len)
    for line, toks in zip(todo, translator.translate_batch_tokens([x.text for x in todo], decode), strict=True):
        line.tokens, line.output = toks, translator.detokenize(toks)
        ended = len(toks) < limit  # a search that stops before its step limit stopped at <eos>
        if not ended:
            line.warnings = [*line.warnings, f"the translation reached the limit of {limit} tokens and was cut "
                             "there (raise --max-len to let it finish)"]
        if attention:
            line.translation = forced_translation(translator, line.text, toks, ended)


def write_lines(lines: list[Line], as_json: bool) -> int:
    """Print one line per input line (warnings on stderr); returns how many lines failed."""
    import json

    failed = 0
    for line in lines:
        for w in line.warnings:
            print(f"warning: line {line.number}: {w}", file=sys.stderr)
        if line.blank:
            print(f"warning: line {line.number}: empty line left untranslated", file=sys.stderr)
        if line.error is not None:
            failed += 1
            print(f"warning: line {line.number}: not translated: {line.error}", file=sys.stderr)
            print(json.dumps({"line": line.number, "error": line.error}, ensure_ascii=False) if as_json else "")
        elif as_json:
            print(json.dumps({"line": line.number, "source": line.text, "src_tokens": line.src_tokens,
                              "tokens": line.tokens, "text": line.output, "warnings": line.warnings},
                             ensure_ascii=False))
        else:
            print(line.output)
    return failed


def utf8_stdout() -> None:
    """Output is UTF-8 whatever the locale says, so ``--json`` is always valid UTF-8."""
    try:
        sys.stdout.reconfigure(encoding="utf-8")
    except (AttributeError, ValueError, OSError):
        pass  # a replaced stdout (tests, embedding) keeps its own encoding
