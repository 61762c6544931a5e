"""``attnviz align``: word alignments from cross-attention over a published test set, scored against its gold links.

The set is read as published (``engine.analysis.goldset``: ``--text`` pairs or ``--src``/``--tgt``, links ``i-j``,
``ipj``, ``i?j`` or NAACL 2003 link lines, numbering from the flags or detected, ``--reverse``); alignment and
scoring are the engine's (``align_steps``). Pharaoh lines go to stdout (0-based, as Pharaoh files are), the figures
to stderr, or everything, with what reproduces it, as one JSON object with ``--json``; ``--out FILE.npz`` writes
the links and AER arrays with that object as a JSON sidecar (``engine.analysis.align_export``).
"""

from __future__ import annotations

import argparse
import sys

from attnviz.cli.args import (
    HEAD_NUMBER,
    PROBABILITY,
    add_dtype,
    add_languages,
    add_limit,
    add_model,
    add_prompt,
    check_model,
    output_file,
)
from attnviz.cli.jsonout import json_text
from attnviz.cli.progress import run_analysis
from attnviz.cli.speed import add_threads, torch_threads
from attnviz.engine.errors import InputError

SYMMETRISATIONS = ("grow-diag-final", "intersection", "union")  # engine.analysis.symmetrise's, torch-free here


def add_command(sub) -> None:
    p = sub.add_parser("align", help="word alignments from cross-attention (Pharaoh), AER against gold links",
                       description="Forced-decode each target sentence and align its words with the source's "
                                   "words (the set's space-separated words, whatever the model's tokenizer does); "
                                   "print one Pharaoh line (i-j, source-target, 0-based) per pair. With --gold, "
                                   "precision, recall and AER of the method, every head, every layer's average, "
                                   "the shift variant and the diagonal baseline. A decoder-only LLM is aligned from "
                                   "the sentence's span of its prompt, each row renormalised over the span.")
    add_model(p)
    add_dtype(p)
    add_threads(p)
    p.add_argument("--text", metavar="PAIRS", help="sentence pairs, one per line: 'source ||| target', tokenised "
                   "(words separated by spaces)")
    p.add_argument("--src", help="source sentences, one per line (instead of --text), plain or '<s snum=ID> words "
                   "</s>' (NAACL 2003)")
    p.add_argument("--tgt", help="target sentences aligned with --src")
    p.add_argument("--gold", help="gold links, one line per pair: i-j sure, ipj or i?j possible (source first); or "
                   "one link per line, 'sentence pos pos [S|P] [confidence]' (NAACL 2003: the Hansards, "
                   "Romanian-English); the format is detected and said")
    numbering = p.add_mutually_exclusive_group()
    numbering.add_argument("--one-based", action="store_true", help="gold words are numbered from 1 (as the "
                           "published sets); default: detected when the file allows, else asked for")
    numbering.add_argument("--zero-based", action="store_true", help="gold words are numbered from 0")
    p.add_argument("--reverse", action="store_true", help="the set lists the model's target side first (gold "
                   "links target-source, --text 'target ||| source'), e.g. English-French Hansards for fr->en")
    p.add_argument("--layer", type=HEAD_NUMBER, help="cross-attention layer (from 1, as every output numbers "
                   "them); with --head")
    p.add_argument("--head", type=HEAD_NUMBER, help="head (from 1); with --layer")
    p.add_argument("--average", action="store_true", help="average all layers and heads (the default)")
    p.add_argument("--shift", action="store_true", help="align a word with the attention of the next step (Chen et "
                   "al. 2020); both variants are scored either way")
    p.add_argument("--threshold", type=PROBABILITY, help="link every source word with weight >= this (default argmax)")
    p.add_argument("--reverse-model", metavar="MODEL", help="a model of the other direction (target -> source): "
                   "its links are combined with these")
    p.add_argument("--reverse-prompted", action="store_true", help="an LLM: the same model prompted the other way "
                   "(the prompt's languages swapped) is the reverse model")
    p.add_argument("--reverse-layer", type=HEAD_NUMBER, help="the reverse model's layer (default: --layer)")
    p.add_argument("--reverse-head", type=HEAD_NUMBER, help="the reverse model's head (default: --head)")
    p.add_argument("--symmetrise", choices=SYMMETRISATIONS, default="grow-diag-final",
                   help="how --reverse-model's links combine with these (default grow-diag-final)")
    add_languages(p)
    add_prompt(p)
    add_limit(p)
    p.add_argument("--json", action="store_true", help="print the alignments, figures and settings as one JSON object")
    p.add_argument("--out", metavar="FILE.npz", type=output_file, help="also write the links (and, with --gold, the "
                   "AER per head and per layer) as arrays, with a JSON sidecar FILE.json of what --json prints")
    p.set_defaults(func=cmd_align)


def _minus_one(value: int | None) -> int | None:
    return None if value is None else value - 1  # given from 1, as shown


def _print_scores(scores: dict, out) -> None:
    rows = []
    for name, value in scores.items():
        for row in value if isinstance(value, list) else [value]:
            where = f" layer {row['layer']}" + (f" head {row['head']}" if "head" in row else "") if "layer" in row \
                else ""
            rows.append((name + where, row))
    print(f"{'alignment':<34} {'precision':>9} {'recall':>9} {'AER':>9} {'links':>7}", file=out)
    for name, row in rows:
        print(f"{name:<34} {row['precision']:9.4f} {row['recall']:9.4f} {row['aer']:9.4f} {row['predicted']:7d}",
              file=out)


def cmd_align(args: argparse.Namespace) -> int:
    torch_threads(args)  # --threads, before the model is read
    from attnviz.engine.analysis.alignment import AlignmentReady, align_steps
    from attnviz.engine.analysis.goldset import read_set
    from attnviz.engine.analysis.llm_words import prompted_the_other_way
    from attnviz.engine.loading import load_translator

    if args.average and args.layer is not None:
        raise InputError("--average and --layer/--head exclude each other")
    if args.out is not None and not args.out.endswith(".npz"):
        raise InputError(f"--out {args.out}: give a file name ending in .npz (its JSON sidecar is written beside it)")
    if args.reverse_model is not None and args.reverse_prompted:
        raise InputError("--reverse-model and --reverse-prompted exclude each other: give one reverse model")
    reverse_head = args.reverse_layer is not None or args.reverse_head is not None
    if args.reverse_model is None and not args.reverse_prompted and reverse_head:
        raise InputError("--reverse-layer/--reverse-head choose a head of --reverse-model; give --reverse-model too "
                         "(or, for an LLM, --reverse-prompted)")
    one_based = True if args.one_based else False if args.zero_based else None
    gold_set = read_set(args.text, args.src, args.tgt, args.gold, one_based=one_based, reverse=args.reverse,
                        limit=args.limit)  # refused before any model is read
    check_model(args.reverse_model)
    translator = load_translator(args.model, args.dtype)
    translator.use_languages(args.src_lang, args.tgt_lang)
    translator.use_prompt(None if args.prompt is None else args.prompt.replace("\\n", "\n"))  # \n: a new line
    reverse = load_translator(args.reverse_model, args.dtype) if args.reverse_model else None
    if args.reverse_prompted:
        reverse = prompted_the_other_way(translator)
    result: AlignmentReady = run_analysis(align_steps(
        translator, gold_set.sources, gold_set.targets, gold_set.gold(), layer=_minus_one(args.layer),
        head=_minus_one(args.head), shift=args.shift, threshold=args.threshold, reverse=reverse,
        reverse_layer=_minus_one(args.reverse_layer), reverse_head=_minus_one(args.reverse_head),
        symmetrise=args.symmetrise))
    card = {"model": args.model, "reverse_model": args.model + " (prompted the other way)" if args.reverse_prompted
            else args.reverse_model,
            "direction": f"{translator.src_spec.lang}->{translator.tgt_spec.lang}", **gold_set.to_json()}
    if args.out is not None:
        from attnviz.engine.analysis.align_export import save_alignment

        print(f"wrote {args.out} and {save_alignment(args.out, result, card)}", file=sys.stderr)
    if args.json:
        print(json_text({**card, **result.to_json()}))
        return 0
    for line in result.alignments:
        print(line)
    if gold_set.indexing is not None:
        print(f"{gold_set.describe()}; method: {result.chosen}{', shift' if args.shift else ''}", file=sys.stderr)
    print(f"tokens: {result.tokens.summary()}", file=sys.stderr)
    if "attention" in result.settings:
        print(f"attention: {result.settings['attention']}", file=sys.stderr)
    if result.scores:
        _print_scores(result.scores, sys.stderr)
    return 0
