"""Command-line sub-commands that measure a checkpoint on a corpus: ``evaluate`` (BLEU, chrF, PPL) and
``head-importance`` (the BLEU lost when each attention head alone is off). Their corpus and decoding flags, and the
``--mask-heads`` flags that ``evaluate`` shares with ``translate``, are defined in ``cli.args``.

``head-importance`` is its own command rather than an option of ``heads``: ``heads`` reads attention statistics
from one teacher-forced pass, while importance decodes and scores the corpus once per head (a different cost and a
different output); it takes ``evaluate``'s corpus flags because it measures what ``evaluate`` measures.
"""

from __future__ import annotations

import argparse
import sys

from attnviz.cli.args import (
    WHOLE_NUMBER,
    add_corpus,
    add_decoding,
    add_dtype,
    add_head_flags,
    add_int8,
    add_model,
    apply_int8,
    decoding,
    head_settings,
    int_range,
    output_file,
)
from attnviz.cli.jsonout import json_text
from attnviz.cli.speed import add_threads, torch_threads
from attnviz.engine.analysis.names import IMPORTANCE_SPLIT
from attnviz.engine.errors import ConfigError, InputError


def _measuring_flags(p: argparse.ArgumentParser, split: str = "test") -> None:
    """The model, the corpus (its own ``split`` by default) and the decoding of a measuring command."""
    add_model(p)
    add_threads(p)
    p.add_argument("--preset", help="use this recipe's corpus (default: the one stored in the checkpoint)")
    add_corpus(p, split=split, reference="--ref", reference_help="reference file aligned with --src")
    add_decoding(p)
    add_dtype(p)


def add_commands(sub) -> None:
    p = sub.add_parser("evaluate", help="measure a checkpoint: BLEU, chrF, PPL")
    _measuring_flags(p)
    add_head_flags(p)
    add_int8(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("head-importance", help="rank every attention head by the BLEU lost when it alone is off",
                       description="Decode the corpus once with every head on, then once per head with that head "
                                   "alone switched off, and rank the heads by the BLEU (bleu_tok) lost. It decodes "
                                   "the corpus 1 + heads times (73 for a 3+3-layer, 8-head Transformer), so use "
                                   "--limit. Each delta comes with a 95%% interval (paired bootstrap over the "
                                   "sentences, seeded): one that contains 0 is noise on this corpus. The validation "
                                   "split is the default, as in the Analysis tab: choosing heads is tuning, which "
                                   "stays off the test split. A separate command from `heads`, which reads "
                                   "attention statistics from one pass.")
    _measuring_flags(p, IMPORTANCE_SPLIT)
    p.add_argument("--kinds", help="attention kinds to measure, comma-separated: enc, dec, cross (default: all)")
    p.add_argument("--rescale-heads", action="store_true",
                   help="rescale the layer's remaining heads by H / (H - 1) while a head is off")
    p.add_argument("--method", choices=("off", "gradient"), default="off",
                   help="off: the BLEU lost with each head alone switched off (1 + heads corpus decodes); gradient: "
                        "Michel et al. 2019's estimate, the mean |dL/d gate| of the reference's teacher-forced loss "
                        "(one forward + backward pass per sentence, whatever the number of heads)")
    p.add_argument("--sample", type=HEAD_SAMPLE, metavar="N",
                   help="--method off: switch off only N heads drawn at random (seeded by --seed); the result says "
                        "which were measured")
    p.add_argument("--seed", type=WHOLE_NUMBER, default=0, help="seed of --sample's draw (default 0)")
    p.add_argument("--json", action="store_true", help="print the ranking as one JSON object")
    p.add_argument("--out", metavar="FILE.json", type=output_file,
                   help="also save the JSON (the Analysis tab opens a --method off file)")
    p.set_defaults(func=cmd_head_importance)


HEAD_SAMPLE = int_range(1, 10**6)  # heads to switch off; a model has at most thousands


def _pairs(translator, args) -> tuple[list, str]:
    from attnviz.engine.corpus.reader import read_parallel
    from attnviz.engine.training.evaluation import split_pairs

    if args.src or args.ref:
        if not (args.src and args.ref):
            raise ConfigError("--src and --ref go together: give both files")
        pairs, _ = read_parallel(args.src, args.ref)
        return (pairs[: args.limit] if args.limit else pairs), f"{args.src} / {args.ref}"
    pairs, source, _ = split_pairs(translator, args.split, args.preset, args.data_dir, args.limit)
    return pairs, source


def cmd_evaluate(args: argparse.Namespace) -> int:
    torch_threads(args)  # --threads, before the model is read
    from attnviz.engine.loading import load_translator
    from attnviz.engine.training.evaluation import evaluate_files, evaluate_split

    translator = load_translator(args.model, args.dtype)
    decode = decoding(args, translator, **head_settings(args, translator))
    apply_int8(args, translator)
    if args.src or args.ref:
        if not (args.src and args.ref):
            raise ConfigError("--src and --ref go together: give both files")
        report = evaluate_files(translator, args.src, args.ref, decode, args.limit)
    else:
        report = evaluate_split(translator, args.split, decode, args.preset, args.data_dir, args.limit)
    if args.int8:
        report["precision"] = "int8 linear layers (dynamic quantisation)"
    if args.json:
        print(json_text(report, ensure_ascii=False))
        return 0
    print(f"{report['sentences']} sentences ({report['source']}), {report['decode']}, {report['seconds']:.1f} s"
          + (", int8" if args.int8 else ""))
    if "heads_off" in report:
        print(f"  heads off {report['heads_off']}" + (" (remaining heads rescaled)" if report["rescale_heads"]
                                                     else ""))
    if "bleu_tok" in report:
        print(f"  bleu_tok  {report['bleu_tok']:.2f}  ({report['bleu_tok_signature']})")
        print(f"  sacrebleu {report['sacrebleu']:.2f}  ({report['sacrebleu_signature']})")
        print(f"  chrF      {report['chrf']:.2f}  ({report['chrf_signature']})")
    if report.get("ppl") is not None:
        print(f"  loss {report['loss']:.3f}  ppl {report['ppl']:.2f}  accuracy {report['accuracy']:.3f}")
    return 0


def cmd_head_importance(args: argparse.Namespace) -> int:
    torch_threads(args)  # --threads, before the model is read
    from attnviz.cli.progress import run_analysis
    from attnviz.engine.analysis.importance import ImportanceReady, importance_steps
    from attnviz.engine.analysis.names import note_lines
    from attnviz.engine.heads import SHORT_NAMES
    from attnviz.engine.loading import load_translator

    translator = load_translator(args.model, args.dtype)
    if not translator.has_source:
        raise InputError(f"{args.model} is a language model; head importance is measured in BLEU, which needs a "
                         "translation model")
    pairs, source = _pairs(translator, args)
    decode = decoding(args, translator, rescale_heads=args.rescale_heads)
    kinds = [k for k in (args.kinds or "").split(",") if k.strip()]
    if args.method == "gradient":
        return gradient_importance(args, translator, pairs, source, kinds)
    result: ImportanceReady = run_analysis(importance_steps(translator, pairs, decode, kinds=kinds, source=source,
                                                            sample=args.sample, seed=args.seed))
    if _saved_or_printed(args, result.to_json(), "head importance"):
        return 0
    print(f"{result.sentences} sentences ({source}), {result.decode}: baseline bleu_tok {result.baseline:.2f}; "
          "delta = BLEU lost with the head alone off; 95% interval: paired bootstrap over the sentences (* = "
          "excludes 0; without *, this corpus cannot tell the delta from noise)")
    for line in note_lines(result.extra):
        print(line)
    if result.sample:
        print(f"measured {result.sample['measured']} of {result.sample['of']} heads, drawn at random (--seed "
              f"{result.sample['seed']}); the others were not switched off")
    print("rank kind  layer head   bleu   delta   95% interval")
    for rank, h in enumerate(result.heads, 1):
        low, high = h.interval or (float("nan"), float("nan"))
        print(f"{rank:>4} {SHORT_NAMES[h.kind]:<5} {h.layer + 1:>5} {h.head + 1:>4} {h.bleu:6.2f} {h.delta:+7.2f} "
              f"{low:+7.2f} {high:+7.2f}{' *' if h.clear() else ''}")
    return 0


def _saved_or_printed(args: argparse.Namespace, result: dict, what: str) -> bool:
    """Save the result's JSON (with the model) to ``--out``; print it with ``--json`` (True: nothing more to print)."""
    from pathlib import Path

    data = {"model": args.model, **result}
    if args.out:
        Path(args.out).write_text(json_text(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{what} saved to {args.out}", file=sys.stderr)
    if args.json:
        print(json_text(data, ensure_ascii=False))
    return bool(args.json)


def gradient_importance(args: argparse.Namespace, translator, pairs, source: str, kinds: list[str]) -> int:
    """``head-importance --method gradient``: Michel et al.'s estimate, least important first, with its cost."""

    from attnviz.cli.progress import run_analysis
    from attnviz.engine.analysis.gradient_importance import GradientImportance, gradient_importance_steps
    from attnviz.engine.heads import SHORT_NAMES

    if args.sample is not None:
        raise ConfigError("--sample draws heads to switch off (--method off); the gradient estimate scores every "
                          "head at once, so leave --sample out")
    result: GradientImportance = run_analysis(gradient_importance_steps(translator, pairs, kinds=kinds,
                                                                        source=source))
    if _saved_or_printed(args, result.to_json(), "gradient head importance"):
        return 0
    print(f"{result.sentences} sentences ({source}): score = mean |dL/d gate| of the reference's teacher-forced "
          f"loss, normalised per layer (Michel et al. 2019); cost: {result.cost()}")
    print("rank kind  layer head   score        raw   (least important first)")
    for rank, (ref, score) in enumerate(result.ranking(), 1):
        print(f"{rank:>4} {SHORT_NAMES[ref.kind]:<5} {ref.layer + 1:>5} {ref.head + 1:>4} {score:7.4f} "
              f"{result.raw[ref.kind][ref.layer, ref.head]:10.3g}")
    return 0
