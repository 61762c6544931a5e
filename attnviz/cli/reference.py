"""The command-line reference as Markdown, written from the argparse parsers themselves (``main.build_parser``), so
the documentation site's CLI page (``docs/hooks.py`` renders it at build time) cannot drift from the code.

``commands()`` lists the sub-commands with their one-line help; ``reference_markdown()`` gives a table of them
and, for each, its description and its ``--help`` text at a fixed width (so the page does not depend on the
terminal that built it).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

from attnviz.cli.main import build_parser

WIDTH = 100  # columns of the help texts on the page


@contextmanager
def _columns(width: int) -> Iterator[None]:
    """argparse wraps help to ``$COLUMNS``: fix it while formatting, then put back what was there."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def commands(parser: argparse.ArgumentParser | None = None) -> list[tuple[str, str]]:
    """(name, one-line help) of every sub-command, in the order ``attnviz --help`` lists them."""
    sub = _subparsers(parser or build_parser())
    if sub is None:
        return []
    return [(choice.dest, choice.help or "") for choice in sub._choices_actions]


def _sections(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> list[str]:
    """The help of every command under ``parser`` (named ``words``), nested sub-commands too."""
    out: list[str] = []
    sub = _subparsers(parser)
    for name, _ in commands(parser):
        child, path = sub.choices[name], (*words, name)  # type: ignore[union-attr]  # commands() found it
        out += ["", f"## attnviz {' '.join(path)} {{#{_anchor('-'.join(path))}}}", "", "```text",
                child.format_help().rstrip(), "```"]
        out += _sections(child, path)
    return out


def _anchor(name: str) -> str:
    return f"attnviz-{name}"


def reference_markdown(width: int = WIDTH) -> str:
    """The whole reference page body: the table of commands, then each command's usage and options."""
    parser = build_parser()
    out = ["| command | what it does |", "| --- | --- |"]
    out += [f"| [`attnviz {name}`](#{_anchor(name)}) | {text} |" for name, text in commands(parser)]
    with _columns(width):
        out += ["", "## attnviz", "", "```text", parser.format_help().rstrip(), "```", *_sections(parser, ())]
    return "\n".join(out) + "\n"
