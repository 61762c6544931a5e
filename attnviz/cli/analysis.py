"""Command-line sub-commands for analysing heads: ``heads`` (statistics, optionally against a second checkpoint)
and ``align`` (word alignments from cross-attention, AER against gold links: its own module, ``cli.align``).

Both consume the engine's analysis generators behind a progress line on stderr (``cli.progress``); results go to
stdout. The corpus flags of ``heads`` are defined in ``cli.args``.
"""

from __future__ import annotations

import argparse
import sys

from attnviz.cli import align
from attnviz.cli.args import add_corpus, add_dtype, add_model
from attnviz.cli.jsonout import json_text
from attnviz.cli.progress import run_analysis
from attnviz.cli.speed import add_threads, torch_threads
from attnviz.engine.analysis.names import note_lines
from attnviz.engine.errors import InputError
from attnviz.engine.heads import NUMBERING, numbered


def add_commands(sub) -> None:
    p = sub.add_parser("heads", help="statistics of every attention head over a corpus",
                       description="Mean entropy, max weight, sink and positional shares, diagonal distance and "
                                   "tags of every layer x head, over the model's val/test split or a text file.")
    add_model(p)
    add_dtype(p)
    add_threads(p)
    add_corpus(p, split="val", reference="--tgt", reference_help="references aligned with --src (optional)")
    p.add_argument("--targets", choices=["reference", "greedy"],
                   help="what the decoder is fed: the references (default when the corpus has them) or the "
                        "model's own greedy outputs (default for a source file alone)")
    p.add_argument("--compare", metavar="MODEL_B", help="a second checkpoint with the same vocabularies: print the "
                   "difference B - A of every statistic per head")
    p.add_argument("--json", action="store_true", help="print the table as one JSON object")
    p.set_defaults(func=cmd_heads)

    align.add_command(sub)


def _stats(translator, args):
    from attnviz.engine.analysis.run import HeadStatsReady, corpus_pairs, head_stats_steps

    sources, targets = corpus_pairs(translator, args.split, args.src, args.tgt, args.limit, args.data_dir)
    if args.targets == "reference" and targets is None:
        raise InputError("--targets reference needs references: give --tgt, or use the model's corpus split")
    if args.targets == "greedy":
        targets = None
    ready: HeadStatsReady = run_analysis(head_stats_steps(translator, sources, targets))
    return ready.stats


def _print_table(rows: list[dict]) -> None:
    """Rows of ``HeadStats.table``/``compare_stats`` (0-based) printed with layers and heads from 1."""
    rows = [numbered(row) for row in rows]
    names = [k for k in rows[0] if k not in ("kind", "layer", "head", "tags", "mask")]
    print("kind     layer head " + " ".join(f"{n[:9]:>9}" for n in names) + "  tags")
    for row in rows:
        values = " ".join(f"{'-':>9}" if row[n] is None else f"{row[n]:9.3f}" for n in names)
        print(f"{row['kind']:<8} {row['layer']:>5} {row['head']:>4} {values}  {','.join(row.get('tags', []))}")


def cmd_heads(args: argparse.Namespace) -> int:
    torch_threads(args)  # --threads, before the model is read
    from attnviz.engine.analysis.run import load_comparable
    from attnviz.engine.analysis.stats import compare_stats
    from attnviz.engine.loading import load_translator

    translator = load_translator(args.model, args.dtype)
    other = load_comparable(args.compare, translator) if args.compare else None  # refused before any work
    stats = _stats(translator, args)
    if other is not None:
        diff = compare_stats(stats, _stats(other, args))
        if args.json:
            print(json_text({"a": args.model, "b": args.compare, "difference": "b - a", "numbering": NUMBERING,
                              "heads": [numbered(row) for row in diff]}))
        else:
            _print_table(diff)  # never empty: load_comparable refuses models that share no kind
        return 0
    if args.json:
        print(json_text(stats.to_json()))
    else:
        for line in note_lines(stats.notes):
            print(line, file=sys.stderr)
        _print_table(stats.table())
    return 0
