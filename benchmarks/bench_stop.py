"""How long a training run takes to end once asked to stop while its data is still being prepared, printed as JSON
(measured, never asserted in tests: machines are shared and noisy). This is what closing the app (or Ctrl+C) waits
for when it comes during the preparation: issue 38 measured 23-69 s when the whole corpus was tokenized first.

A run of the ``multi30k-de-en`` preset (spaCy tokenizers, 29,000 pairs) when ``ATTNVIZ_DATA`` holds Multi30k, else
of a synthetic parallel corpus of ``--pairs`` whitespace-tokenized pairs, is started in a thread; its stop event is
set ``--after`` seconds later (before the first step), and the time until the generator ends is reported with the
events it gave (``TrainNote`` alone: stopped while preparing, nothing trained or saved). Medians over ``--repeats``.

    python benchmarks/bench_stop.py [--after 0.5] [--repeats 3] [--pairs 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _recipe(folder: Path, pairs: int):
    """The preset on the real corpus, or a whitespace-tokenized synthetic one of ``pairs`` pairs; and its data dir."""
    from attnviz.engine.corpus.reader import CorpusSpec
    from attnviz.engine.text.tokenize import TokenizerSpec
    from attnviz.engine.training.presets import get_preset

    data = os.environ.get("ATTNVIZ_DATA")
    if data and (Path(data) / "multi30k_train.de.gz").exists():
        return get_preset("multi30k-de-en"), data, "multi30k-de-en (spaCy)"
    rng = random.Random(0)
    tsv = folder / "pairs.tsv"
    words = [f"w{i}" for i in range(2000)]
    tsv.write_text("".join(f"{' '.join(rng.choices(words, k=12))}\t{' '.join(rng.choices(words, k=12))}\n"
                           for _ in range(pairs)), encoding="utf-8")
    corpus = CorpusSpec("files", "de", "en", paths={"train": [str(tsv)], "val": [str(tsv)]})
    recipe = replace(get_preset("multi30k-de-en"), corpus=corpus, src_tokenizer=TokenizerSpec("de", mode="whitespace"),
                     tgt_tokenizer=TokenizerSpec("en", mode="whitespace"))
    return recipe, None, f"synthetic {pairs:,} (whitespace)"


def _once(recipe, data_dir, after: float, out: Path) -> tuple[float, list[str]]:
    from attnviz.engine.training.loop import train

    stop, events = threading.Event(), []
    thread = threading.Thread(target=lambda: events.extend(train(recipe, out, data_dir, stop=stop)), daemon=True)
    thread.start()
    time.sleep(after)
    asked = time.perf_counter()
    stop.set()
    thread.join(600)
    return time.perf_counter() - asked, [type(e).__name__ for e in events]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--after", type=float, default=0.5, help="seconds from the start to the stop (0.5)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=200_000, help="synthetic corpus size without ATTNVIZ_DATA")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        recipe, data_dir, corpus = _recipe(Path(tmp), args.pairs)
        runs = [_once(recipe, data_dir, args.after, Path(tmp) / f"run{i}.safetensors") for i in range(args.repeats)]
    print(json.dumps({"corpus": corpus, "stop_after_s": args.after, "repeats": args.repeats,
                      "ended_after_stop_s_median": round(statistics.median(s for s, _ in runs), 3),
                      "ended_after_stop_s": [round(s, 3) for s, _ in runs], "events": runs[0][1],
                      "load_average": [round(x, 2) for x in os.getloadavg()]}))


if __name__ == "__main__":
    main()
