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

``--llm NAME`` (``qwen2.5-0.5b``, ``llama-3.2-1b``, ``gemma-3-1b``: ``llm_large.SHAPES``) measures instead, beside the
bundled model, a decoder-only LLM of that shape with random weights (the folder ``llm_large`` writes once into its
cache, ``ATTNVIZ_BENCH_CACHE``), the prompt of ``SENTENCE`` and ``--tokens`` greedy output tokens (random weights do
not reach its end token first), ``--llm-repeats`` runs after a warm-up; a method not defined for it is listed with
why. Its targets (issue 37): gradient x input <= 2 s, ALTI <= 3 s (CPU seconds, one thread).

    python benchmarks/bench_attribution.py [--threads 2] [--repeats 5] [--steps 32] [--tokens 20] [--no-marian]
    python benchmarks/bench_attribution.py --llm qwen2.5-0.5b --threads 1 --repeats 3 --llm-repeats 1 \
        [--only gradient-x-input,alti-plus,value-zeroing,integrated-gradients,logit-lens]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
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
LLM_TARGETS_CPU_S = {"gradient-x-input": 2.0, "alti-plus": 3.0}  # issue 37, one thread, 20 output tokens


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


def measure(translator, tokens: int, repeats: int, steps: int, only: tuple[str, ...] = ()) -> dict:
    """Seconds per sentence of every method defined for the translator's kind (those in ``only`` when given), and
    of the logit lens."""
    translation = translator.translate(SENTENCE, DecodeConfig(max_len=tokens))
    src, out = translation.src_tokens, translation.tokens
    figures: dict[str, dict] = {}
    for method in methods_for(translator).defined:
        if only and method.name not in only:
            figures[method.name] = {"skipped": "not in --only"}
            continue
        settings = AttributionSettings(steps=steps) if "steps" in method.settings else AttributionSettings()
        figures[method.name] = _timed(lambda m=method.name, s=settings: list(attribution_steps(
            translator, m, src, out, s, roles=translation.roles)), repeats)
        if "steps" in method.settings:
            figures[method.name]["steps"] = steps
    if lens_not_defined(translator) is None and (not only or "logit-lens" in only):
        figures["logit-lens"] = _timed(lambda: list(logit_lens_steps(translator, src, out)), repeats)
    undefined = {method.name: why for method, why in methods_for(translator).undefined}
    return {"src_tokens": len(src), "output_tokens": len(out), "translation": translation.text, "methods": figures,
            "not_defined": undefined}


def llm_figures(name: str, tokens: int, repeats: int, steps: int, only: tuple[str, ...] = ()) -> dict:
    """``measure`` on the random ``name``-shaped LLM folder (written once into ``llm_large``'s cache)."""
    from llm_large import SHAPES, write_folder

    if name not in SHAPES:
        raise SystemExit(f"--llm: unknown shape {name!r}; choose one of {', '.join(SHAPES)}")
    root = Path(os.environ.get("ATTNVIZ_BENCH_CACHE", Path(tempfile.gettempdir()) / "attnviz-bench"))
    root.mkdir(parents=True, exist_ok=True)
    figures = measure(load_translator(write_folder(name, root, "float32")), tokens, repeats, steps, only)
    within = {m: figures["methods"][m]["cpu_s_median"] <= limit for m, limit in LLM_TARGETS_CPU_S.items()
              if "cpu_s_median" in figures["methods"].get(m, {})}
    return {"model": f"{name}-shaped, random weights (float32)", **figures, "targets_cpu_s": LLM_TARGETS_CPU_S,
            "within_target": within}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(BUNDLED), help="checkpoint (default: the bundled de-en model)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=32, help="integrated gradients' points")
    parser.add_argument("--tokens", type=int, default=20, help="most output tokens (the MarianMT model's output)")
    parser.add_argument("--marian-repeats", type=int, default=1)
    parser.add_argument("--no-marian", action="store_true", help="skip the MarianMT-sized measurement")
    parser.add_argument("--llm", metavar="SHAPE", help="a random decoder-only LLM of this shape (qwen2.5-0.5b...) "
                                                       "instead of the MarianMT-sized model")
    parser.add_argument("--llm-repeats", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated methods (and logit-lens) to measure; default all")
    args = parser.parse_args()
    only = tuple(name for name in args.only.split(",") if name)
    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    bundled = measure(load_translator(args.model), args.tokens, args.repeats, args.steps, only)
    within = {name: bundled["methods"][name]["s_median"] <= limit for name, limit in TARGETS_S.items()
              if "s_median" in bundled["methods"].get(name, {})}
    report = {"model": Path(args.model).name, "threads": args.threads, "repeats": args.repeats, "bundled": bundled,
              "targets_s": TARGETS_S, "within_target": within}
    if args.llm:
        report["llm"] = llm_figures(args.llm, args.tokens, args.llm_repeats, args.steps, only)
    else:
        report["marian_sized"] = "skipped (--no-marian)" if args.no_marian else \
            measure(marian_translator(), args.tokens, args.marian_repeats, args.steps)
    report["load_average_1min"] = [round(load[0], 1), round(os.getloadavg()[0], 1)]
    print(json.dumps(report, ensure_ascii=False))


if __name__ == "__main__":
    main()
