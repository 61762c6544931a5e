"""The suspect (hallucination) score calibrated on the bundled de-en model, printed as JSON: what each component
separates (AUROC, overall and per kind of wrong pair) on the Multi30k validation split, the rule the calibration
chose, and how its verdict does on the test split it never saw (the share of each kind of pair it flags), beside
the rule-of-thumb verdict it replaces (per token below -2.0, Attn-ign-SRC or Wass-to-Unif above 0.5, ALTI+ source
below 1/3). Pairs per sentence: the model's own translation and the human reference (good); another sentence's
translation, the own one half replaced by it, its first half said three times (wrong). Needs ATTNVIZ_DATA.

    python benchmarks/bench_suspect_calibration.py [--model CKPT] [--limit 0] [--test-limit 0] [--store-beside]

``--store-beside`` keeps the validation calibration in ``NAME.suspect.json`` beside the model (how the bundled
models carry theirs without rewriting their weights).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

from attnviz.engine.analysis.run import corpus_pairs
from attnviz.engine.attribution.base import AttributionProgress
from attnviz.engine.attribution.suspect.calibrate import scored_pairs
from attnviz.engine.attribution.suspect.fit import fit
from attnviz.engine.attribution.suspect.rule import BAD_KINDS, GOOD_KINDS, judge
from attnviz.engine.attribution.suspect.store import store_calibration
from attnviz.engine.loading import load_translator

ROOT = Path(__file__).resolve().parent.parent
OLD_SIGNS = {"mean_logprob": (-1, -2.0), "attn_ign_src": (1, 0.5), "wass_to_unif": (1, 0.5),
             "alti_source_share": (-1, 1 / 3)}  # the verdict before calibration (rules of thumb)


def _pairs(translator, split: str, limit: int, data_dir: str | None) -> list[tuple[str, dict]]:
    sources, references = corpus_pairs(translator, split, None, None, limit, data_dir)
    return [e for e in scored_pairs(translator, sources, references) if not isinstance(e, AttributionProgress)][0]


def _old_verdict(found: dict) -> bool:
    return any(math.isfinite(found.get(n, math.nan)) and way * found[n] > way * line
               for n, (way, line) in OLD_SIGNS.items())


def _rates(rows, flag) -> dict[str, float]:
    return {kind: round(sum(flag(f) for k, f in rows if k == kind) / max(1, sum(k == kind for k, _ in rows)), 4)
            for kind in (*GOOD_KINDS, *BAD_KINDS)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(ROOT / "models" / "de-en-multi30k.safetensors"))
    parser.add_argument("--limit", type=int, default=0, help="validation sentences to calibrate on (0 = all)")
    parser.add_argument("--test-limit", type=int, default=0, help="test sentences to check the verdict on (0 = all)")
    parser.add_argument("--data-dir", default=os.environ.get("ATTNVIZ_DATA"))
    parser.add_argument("--store-beside", action="store_true", help="keep the calibration beside the model")
    args = parser.parse_args()
    translator = load_translator(args.model)
    start = time.perf_counter()
    val = _pairs(translator, "val", args.limit, args.data_dir)
    sentences = sum(k == "own translation" for k, _ in val)
    calibration = fit(val, f"val split, {sentences} sentences", str(translator.metadata.get("name", "")))
    calibrate_s = time.perf_counter() - start
    test = _pairs(translator, "test", args.test_limit, args.data_dir)
    report = {
        "model": Path(args.model).name, "val_pairs": len(val), "test_pairs": len(test), "pairs": calibration.pairs,
        "auroc": {n: round(f.auroc, 4) for n, f in calibration.components.items()},
        "auroc_by_kind": {n: {k: round(v, 4) for k, v in f.by_kind.items()} for n, f in calibration.components.items()},
        "votes": {n: f.note for n, f in calibration.components.items()},
        "lines": {n: round(f.line, 4) for n, f in calibration.components.items()},
        "rule": calibration.rule, "rule_auroc": round(calibration.auroc, 4), "notes": list(calibration.notes),
        "score_line": round(calibration.line, 4),
        "flagged_val": {k: round(v, 4) for k, v in calibration.flagged.items()},
        "flagged_test_calibrated": _rates(test, lambda f: judge(f, calibration).suspect),
        "flagged_test_uncalibrated_fallback": _rates(test, lambda f: judge(f, None).suspect),
        "flagged_test_old_rule_of_thumb": _rates(test, _old_verdict),
        "calibrate_s": round(calibrate_s, 1), "load_average": os.getloadavg(),
    }
    if args.store_beside:
        report["stored"] = str(store_calibration(args.model, calibration, beside=True).relative_to(ROOT))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
