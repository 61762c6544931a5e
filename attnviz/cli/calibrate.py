"""``attnviz calibrate``: measure what each suspect-score component separates on a model's own held-out sentences
(``engine.attribution.suspect.calibrate``) and keep the calibration with the model (``suspect.store``), so that the
Translate tab's verdict, the Analysis tab's ranking and ``attnviz`` read it. Progress goes to stderr, the AUROC of
each component to stdout.
"""

from __future__ import annotations

import argparse
import sys

from attnviz.cli.args import add_corpus, add_dtype, add_model
from attnviz.cli.jsonout import json_text


def add_command(sub) -> None:
    p = sub.add_parser("calibrate", help="calibrate the suspect (hallucination) score on the model's held-out data",
                       description="Translate held-out sentences (the validation split by default), score five pairs "
                                   "per sentence (the model's own translation and the human reference; another "
                                   "sentence's translation, half of it replaced, its first half repeated), measure "
                                   "each component's AUROC, pick the lines that flag at most 5%% of each kind of good "
                                   "pair, and keep the result in the checkpoint's card (or beside the model). The "
                                   "verdict and the ranking then weigh each component by what it separated.")
    add_model(p)
    add_corpus(p, split="val", reference="--ref", reference_help="human references aligned with --src")
    add_dtype(p)
    p.add_argument("--beside", action="store_true",
                   help="keep the calibration in NAME.suspect.json beside the model instead of rewriting the "
                        "checkpoint's card (an imported model's folder always keeps it beside)")
    p.add_argument("--no-store", action="store_true", help="measure and print only; keep nothing")
    p.add_argument("--json", action="store_true", help="print the calibration as one JSON object")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from attnviz.cli.progress import run_analysis
    from attnviz.engine.attribution.suspect.calibrate import calibration_job
    from attnviz.engine.attribution.suspect.rule import Calibration, describe
    from attnviz.engine.attribution.suspect.store import store_calibration
    from attnviz.engine.loading import load_translator

    translator = load_translator(args.model, args.dtype)
    calibration: Calibration = run_analysis(calibration_job(translator, args.split, args.src, args.ref, args.limit,
                                                            data_dir=args.data_dir))
    where = None if args.no_store else store_calibration(args.model, calibration, args.beside)
    if where is not None:
        print(f"calibration kept in {where}", file=sys.stderr)
    if args.json:
        print(json_text({"model": args.model, "kept_in": where and str(where), **calibration.to_dict()},
                        ensure_ascii=False))
        return 0
    for line in describe(calibration, f"kept in {where}" if where else "not kept (--no-store)"):
        print(line)
    return 0
