"""The batch size ``attnviz translate`` uses by default, per precision, printed as JSON (never asserted in tests).

On bench_peers' random MarianMT folder (OPUS-MT's size; ``--size small`` for a toy one), ``translate_batch`` of
``--sentences`` sentences, greedy, ``--tokens`` tokens each, at every batch size of ``--sizes``, float32 and int8,
one thread, interleaved round by round; medians (seconds), paired ratios against the CLI's default
(``cli.speed.DEFAULT_BATCH``: below 1, that size was faster) and the load average.

    python benchmarks/bench_batch_size.py [--folder DIR] [--size marian|small] [--repeats 3] [--sentences 200]
        [--tokens 20] [--sizes 16,32,64,128]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_peers import SIZES, build_folder, corpus, interleaved, paired  # noqa: E402

from attnviz.cli.speed import DEFAULT_BATCH  # noqa: E402
from attnviz.engine.config import DecodeConfig  # noqa: E402
from attnviz.engine.loading import load_translator  # noqa: E402
from attnviz.engine.models.quantize import quantize_int8  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=Path("/tmp/attnviz-bench-peers/marian"))
    parser.add_argument("--size", choices=sorted(SIZES), default="marian")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--sizes", default="16,32,64,128")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes = sorted({int(s) for s in args.sizes.split(",")} | {DEFAULT_BATCH["float32"], DEFAULT_BATCH["int8"]})
    translator = load_translator(str(build_folder(args.folder, args.size)))
    int8 = copy.deepcopy(translator)
    quantize_int8(int8.model)
    texts, greedy = corpus(args.sentences), DecodeConfig(max_len=args.tokens)
    runs = {f"{name}/{size}": (lambda t=model, n=size: t.translate_batch(texts, greedy, n))
            for name, model in (("float32", translator), ("int8", int8)) for size in sizes}
    times = interleaved(runs, args.repeats)
    report: dict[str, object] = {"size": SIZES[args.size], "sentences": args.sentences, "tokens": args.tokens,
                                 "repeats": args.repeats, "threads": 1, "default": DEFAULT_BATCH}
    for name in ("float32", "int8"):
        default = f"{name}/{DEFAULT_BATCH[name]}"
        report[name] = {str(size): {"s_median": round(statistics.median(times[f"{name}/{size}"]) / 1000, 2),
                                    "vs_default": paired(times, f"{name}/{size}", default)} for size in sizes}
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
