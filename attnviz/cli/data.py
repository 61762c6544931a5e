"""``attnviz data``: list the public corpora and download one into the data folder (resumable, checksummed).

It consumes the engine's download generator and shows each file's progress on stderr; training and evaluation
read what it fetched (``--data-dir`` or ``$ATTNVIZ_DATA``).
"""

from __future__ import annotations

import argparse
import sys

from attnviz.cli.args import add_data_dir
from attnviz.cli.progress import bar


def add_command(sub) -> None:
    p = sub.add_parser("data", help="fetch the public corpora")
    data_sub = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    d = data_sub.add_parser("download", help="download a corpus into the data folder (resumable, checksummed)")
    d.add_argument("name", help="multi30k, tatoeba-fra, tatoeba-deu or names")
    add_data_dir(d, help="target folder (default: $ATTNVIZ_DATA or the user data folder)")
    d.add_argument("--mirror", help="fetch every file from MIRROR/<file name> instead of its origin")
    d.set_defaults(func=cmd_data_download)
    data_sub.add_parser("list", help="list the corpora that can be downloaded").set_defaults(func=cmd_data_list)


def cmd_data_list(args: argparse.Namespace) -> int:
    from attnviz.engine.corpus.download import SOURCES

    for name, (description, files) in SOURCES.items():
        print(f"{name}\n    {description}\n    files: {', '.join(f.local for f in files)}")
    return 0


def cmd_data_download(args: argparse.Namespace) -> int:
    from attnviz.engine.corpus.download import download
    from attnviz.engine.corpus.reader import resolve_data_dir

    target = resolve_data_dir(args.data_dir)
    tty, resumed = sys.stderr.isatty(), set()
    for p in download(args.name, target, args.mirror):
        if p.skipped:
            print(f"{p.file}: already present and verified", file=sys.stderr)
        elif p.resumed_from and p.file not in resumed:
            resumed.add(p.file)
            print(f"{p.file}: resuming the partial download at {p.resumed_from:,} bytes", file=sys.stderr)
        elif p.finished:
            print(("\r" if tty else "") + f"{p.file}: {p.done:,} bytes, checksum verified" + " " * 20, file=sys.stderr)
        elif tty:
            fraction = p.done / p.total if p.total else 0.0
            print(f"\r{p.file} [{bar(fraction)}] {p.done / 1e6:6.1f} MB", end="", file=sys.stderr, flush=True)
    print(f"{args.name} is in {target}")
    return 0
