"""Opening a model folder (issue 29), printed as JSON: attnviz against ``transformers`` and against attnviz's
previous loading, measured interleaved in one run, one thread, each in a fresh interpreter
(``benchmarks.loading_probe``). Never asserted in tests: the machines are shared and noisy.

Figures (medians over ``--repeats``): opening's time and peak memory after the first token, for this checkout,
the ``--baseline`` checkout (e.g. /work/main, the loading before) and ``transformers``; a cold ``attnviz translate -m
FOLDER`` against the same with ``transformers``. Targets: peak <= 1.1x ``transformers``', opening time <= 0.5x the
baseline's, cold translate <= 0.6x ``transformers``'.

With ``--size nllb600m`` the folder is a random NLLB-200 one of NLLB-200-distilled-600M's shape (a 256k x 1024
shared embedding whose rows attnviz reorders) and transformers' side is its M2M100 network fed ids (no cold
translate); targets there: peak <= 1.1x and opening time <= 1.0x ``transformers``'. ``--folder`` keeps the folder
(2.5 GB for nllb600m) for another run.

    python benchmarks/bench_loading.py [--size marian|nllb600m] [--repeats 3] [--baseline /work/main]
        [--no-transformers] [--folder DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loading_probe import ROOT, SIZES, cold_translate, marian_folder, open_probe  # noqa: E402


def _median(runs: list[dict[str, float]], key: str) -> float:
    return round(statistics.median(r[key] for r in runs), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="marian")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another attnviz checkout to compare with (its loading)")
    parser.add_argument("--no-transformers", action="store_true", help="skip the transformers side")
    parser.add_argument("--folder", type=Path, help="where the random folder is written once and kept")
    args = parser.parse_args()
    nllb = args.size.startswith("nllb")
    sides = {"attnviz": ("attnviz", ROOT)}
    if args.baseline:
        sides["baseline"] = ("attnviz", args.baseline.resolve())
    if not args.no_transformers:
        sides["transformers"] = ("transformers-m2m100" if nllb else "transformers", ROOT)
    opened: dict[str, list] = {side: [] for side in sides}
    cold: dict[str, list] = {side: [] for side in sides if side != "baseline" and not nllb}
    with tempfile.TemporaryDirectory() as tmp:
        folder = marian_folder(args.folder or Path(tmp) / ("nllb-200" if nllb else "opus-mt-de-en"), args.size)
        for _ in range(args.repeats):  # interleaved: a slower moment of the machine hits every side alike
            for side, (which, root) in sides.items():
                opened[side].append(open_probe(which, folder, root))
                if side in cold:
                    cold[side].append(cold_translate(which, folder, root))
    report: dict[str, object] = {"size": args.size, "repeats": args.repeats, "load_average": os.getloadavg()}
    for side, runs in opened.items():
        report[side] = {f"{k}_median": _median(runs, k) for k in ("import_s", "open_s", "first_token_s", "peak_mib")}
    for side, runs in cold.items():
        report[f"{side}_cold_translate"] = {f"{k}_median": _median(runs, k) for k in ("wall_s", "peak_mib")}
    ratios = {}
    if "transformers" in opened:
        ratios["open_peak_vs_transformers"] = _median(opened["attnviz"], "peak_mib") / _median(
            opened["transformers"], "peak_mib")
        ratios["open_time_vs_transformers"] = _median(opened["attnviz"], "open_s") / _median(
            opened["transformers"], "open_s")
        if cold:
            ratios["cold_translate_vs_transformers"] = _median(cold["attnviz"], "wall_s") / _median(
                cold["transformers"], "wall_s")
    if "baseline" in opened:
        ratios["open_time_vs_baseline"] = _median(opened["attnviz"], "open_s") / _median(opened["baseline"], "open_s")
        ratios["open_peak_vs_baseline"] = _median(opened["attnviz"], "peak_mib") / _median(
            opened["baseline"], "peak_mib")
    report["ratios"] = {k: round(v, 3) for k, v in ratios.items()}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
