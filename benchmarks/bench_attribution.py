"""Attribution speed on CPU, printed as JSON (never asserted in tests: machines are shared and noisy).

Measures every attribution method registered when it runs (``engine.attribution``: saliency, gradient x input,
integrated gradients with ``--steps`` points, and ALTI+ / value zeroing once registered) and the logit lens, on one
sentence of about 20 output tokens, every output step, the greedy translation teacher-forced: seconds per sentence,
median of ``--repeats`` runs after a warm-up (wall clock, and the process' CPU seconds), with ``--threads`` CPU
threads. First on the bundled de-en model (models/de-en-multi30k.safetensors, or ``--model``), then on a
MarianMT-sized model with random weights (d 512, 6+6 layers, 8 heads, ff 2048, a 58,101-piece vocabulary:
``bench_decode.marian_translator``; ``--no-marian`` skips it), whose greedy output is cut at ``--tokens`` tokens.
The issue's targets on the bundled model are printed beside the figures. The load average is reported, since a
loaded machine slows every figure.

    python benchmarks/bench_attribution.py [--threads 2] [--repeats 5] [--steps 32] [--tokens 20] [--no-marian]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch
from bench_decode import marian_translator

from attnviz.engine.attribution.base import AttributionSettings, attribution_steps, methods_for
from attnviz.engine.attribution.logit_lens import lens_not_defined, logit_lens_steps
from attnviz.engine.config import DecodeConfig
from attnviz.engine.loading import load_translator

BUNDLED = Path(__file__).resolve().parents[1] / "models" / "de-en-multi30k.safetensors"
SENTENCE = "Ein kleines Mädchen in einem rosa Kleid klettert eine Treppe hinauf , während ihr Vater am Fuß der " \
           "Treppe wartet ."
TARGETS_S = {"gradient-x-input": 0.5, "integrated-gradients": 5.0, "alti-plus": 1.0, "value-zeroing": 2.0}


def _timed(run, repeats: int) -> dict:
    """Wall-clock seconds of ``repeats`` runs after a warm-up (median and all), and the median CPU seconds of the
    process (all threads): on a loaded machine the wall clock waits for other programs, the CPU time does not."""
    run()  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {"s_median": round(statistics.median(wall), 3), "cpu_s_median": round(statistics.median(cpu), 3),
            "runs": [round(r, 3) for r in wall]}


def measure(translator, tokens: int, repeats: int, steps: int) -> dict:
    """Seconds per sentence of every method defined for the translator's kind, and of the logit lens."""
    translation = translator.translate(SENTENCE, DecodeConfig(max_len=tokens))
    src, out = translation.src_tokens, translation.tokens
    figures: dict[str, dict] = {}
    for method in methods_for(translator.kind).defined:
        settings = AttributionSettings(steps=steps) if "steps" in method.settings else AttributionSettings()
        figures[method.name] = _timed(lambda m=method.name, s=settings: list(attribution_steps(translator, m, src,
                                                                                                out, s)), repeats)
        if "steps" in method.settings:
            figures[method.name]["steps"] = steps
    if lens_not_defined(translator.kind) is None:
        figures["logit-lens"] = _timed(lambda: list(logit_lens_steps(translator, src, out)), repeats)
    return {"src_tokens": len(src), "output_tokens": len(out), "translation": translation.text, "methods": figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(BUNDLED), help="checkpoint (default: the bundled de-en model)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=32, help="integrated gradients' points")
    parser.add_argument("--tokens", type=int, default=20, help="most output tokens (the MarianMT model's output)")
    parser.add_argument("--marian-repeats", type=int, default=1)
    parser.add_argument("--no-marian", action="store_true", help="skip the MarianMT-sized measurement")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    bundled = measure(load_translator(args.model), args.tokens, args.repeats, args.steps)
    within = {name: bundled["methods"][name]["s_median"] <= limit for name, limit in TARGETS_S.items()
              if name in bundled["methods"]}
    marian = None if args.no_marian else measure(marian_translator(), args.tokens, args.marian_repeats, args.steps)
    print(json.dumps({"model": Path(args.model).name, "threads": args.threads, "repeats": args.repeats,
                      "load_average_1min": [round(load[0], 1), round(os.getloadavg()[0], 1)],
                      "bundled": bundled, "targets_s": TARGETS_S, "within_target": within,
                      "marian_sized": marian or "skipped (--no-marian)"}, ensure_ascii=False))


if __name__ == "__main__":
    main()
