"""Batch translation for ``attnviz translate``: every input line gets exactly one output line.

Standard input is read as bytes and split into lines; each line is decoded on its own, so an undecodable line is
reported by number (with the offending byte in hex, never echoed raw) while every other line is translated. A line
the model cannot read (only control characters, NUL, a zero-width space...) gets an empty output line and a warning
naming its line number on stderr, or ``{"line": N, "error": ...}`` with ``--json``; blank lines stay blank with a
warning. ``translate_lines`` reports how many lines failed, and the command exits with status 1 when any did.
"""

from __future__ import annotations

import io
import sys
import time
from dataclasses import dataclass, field

from attnviz.engine.errors import InputError
from attnviz.engine.events import Translation
from attnviz.engine.text.vocab import EOS


@dataclass
class Line:
    number: int  # 1-based
    text: str = ""
    error: str | None = None  # why this line cannot be translated
    src_tokens: list[str] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    output: str = ""
    warnings: list[str] = field(default_factory=list)
    translation: Translation | None = None  # the full translation when attention is exported
    n_best: list[dict] = field(default_factory=list)  # with --n-best: rank, text, tokens, score, logprob

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


def translate_lines(translator, lines: list[Line], decode, capture: bool = False, n_best: int = 0,
                    batch: tuple[int, object] = (128, None)) -> None:
    """Fill in each line's tokens and output (or its error). Plain output takes the batched search (``batch``: the
    sentences a batch and the vocabulary shortlist or None); ``capture`` (attention export) or ``n_best`` runs the
    search sentence by sentence as events (``beam_steps``, greedy when the beam is 1), which chooses the same tokens
    and keeps every hypothesis' attention and score."""
    from attnviz.engine.search.limit import capped_limit, limit_warning

    todo = []
    for line in lines:
        if line.error is None and not line.blank:
            try:
                line.src_tokens, _, line.warnings = translator.prepare_source(line.text)
                todo.append(line)
            except InputError as exc:
                line.error = str(exc)
    limit, forced_end = capped_limit(decode.max_len, translator.model.max_target_len), decode.forced_eos >= 0
    if decode.temperature > 0 and decode.beam == 1:  # sampled (an LLM folder's own decoding): each line seeded
        ended = [_sample_line(translator, line, limit, decode) for line in todo]
    elif capture or n_best:
        ended = [_search_line(translator, line, limit, decode, n_best) for line in todo]
    else:
        ended = []
        progress = decoding_progress()
        try:
            found = translator.translate_batch_tokens([x.text for x in todo], decode, *batch,
                                                      progress=progress.show if progress else None)
        finally:
            if progress:
                progress.clear()
        for line, toks in zip(todo, found, strict=True):
            line.tokens, line.output = toks, translator.detokenize(toks)
            # a search that stops before its step limit chose <eos>; an <eos> forced at the last step was not chosen
            ended.append(len(toks) < limit - (1 if forced_end else 0))
    for line, done in zip(todo, ended, strict=True):
        if not done:
            line.warnings = [*line.warnings, limit_warning(limit, "--max-len", forced_end)]


class DecodingProgress:
    """On a terminal, one line rewritten in place while a batch decodes (an LLM may take minutes over a long answer):
    the sentences done and the step of the batch decoding now, at most five times a second."""

    def __init__(self) -> None:
        from attnviz.cli.progress import ProgressLine

        self.line, self.last = ProgressLine(), 0.0

    def show(self, done: int, total: int, step: int, limit: int) -> None:
        now = time.monotonic()
        if now - self.last >= 0.2:
            self.last = now
            self.line.write(f"translating: {done}/{total} sentences done, step {step} of at most {limit}")

    def clear(self) -> None:
        self.line.clear()


def decoding_progress() -> DecodingProgress | None:
    """A progress line when stderr is a terminal; none in a log or a pipe (nothing there to rewrite)."""
    return DecodingProgress() if sys.stderr.isatty() else None


def _sample_line(translator, line: Line, limit: int, decode) -> bool:
    """One line sampled step by step at ``decode.temperature`` from a generator seeded with ``decode.seed`` (the
    same line gives the same output). Returns whether it ended by choosing ``<eos>`` before the step ``limit``."""
    from attnviz.engine.search.limit import reached_limit

    answer = translator.translate(line.text, decode)
    line.translation = answer
    line.tokens = [t for t in answer.tokens if t != EOS]
    line.output = answer.text
    return bool(answer.tokens) and answer.tokens[-1] == EOS and not reached_limit(answer.tokens, limit,
                                                                                  decode.forced_eos >= 0)


def _search_line(translator, line: Line, limit: int, decode, n_best: int) -> bool:
    """One line searched as events into a ``SearchTree``: its chosen translation with every attention map and its
    n-best list. Returns whether the chosen hypothesis ended by choosing ``<eos>`` before the step ``limit``."""
    from attnviz.engine.search.limit import reached_limit
    from attnviz.engine.search.tree import SearchTree

    tree = SearchTree.from_events(translator.beam_steps(line.text, decode))
    answer = tree.answer(translator.detokenize)
    if answer is None:  # nothing finished (cannot happen with a finite step limit): an empty translation
        return False
    line.translation = answer
    ended = bool(answer.tokens) and answer.tokens[-1] == EOS and not reached_limit(answer.tokens, limit,
                                                                                    decode.forced_eos >= 0)
    line.tokens = [t for t in answer.tokens if t != EOS]
    line.output = answer.text
    for node in tree.n_best(n_best):
        words = [s.token for s in tree.path(node.id) if s.token != EOS]
        line.n_best.append({"rank": len(line.n_best) + 1, "text": translator.detokenize(words), "tokens": words,
                            "score": node.normalised, "logprob": node.score})
    return ended


BLANK_WARNING = "empty line left untranslated"


def write_lines(lines: list[Line], as_json: bool, n_best: int = 0) -> int:
    """Print one line per input line (warnings on stderr), or with ``n_best`` one line per hypothesis (LINE, RANK,
    normalised score, summed log-probability, text; tab-separated); returns how many lines failed."""
    from attnviz.cli.jsonout import json_text

    failed = 0
    for line in lines:
        if line.blank:  # said on stderr and in the line's own --json record alike
            line.warnings = [*line.warnings, BLANK_WARNING]
        for w in line.warnings:
            print(f"warning: line {line.number}: {w}", file=sys.stderr)
        if line.error is not None:
            failed += 1
            print(f"warning: line {line.number}: not translated: {line.error}", file=sys.stderr)
            print(json_text({"line": line.number, "error": line.error}, ensure_ascii=False) if as_json else "")
        elif as_json:
            print(json_text({"line": line.number, "source": line.text, "src_tokens": line.src_tokens,
                              "tokens": line.tokens, "text": line.output, "warnings": line.warnings,
                              **({"n_best": line.n_best} if n_best else {})}, ensure_ascii=False))
        elif n_best and line.n_best:
            for h in line.n_best:
                print(f"{line.number}\t{h['rank']}\t{h['score']:.4f}\t{h['logprob']:.4f}\t{h['text']}")
        else:
            print(line.output)
    return failed


def utf8_stdout() -> None:
    """Output is UTF-8 whatever the locale says, so ``--json`` is always valid UTF-8."""
    if not isinstance(sys.stdout, io.TextIOWrapper):
        return  # a replaced stdout (tests, embedding) keeps its own encoding
    try:
        sys.stdout.reconfigure(encoding="utf-8")
    except (ValueError, OSError):
        pass  # a closed or detached stream keeps its encoding
