"""Training throughput on CPU, printed as JSON: length-bucketed batches against random padded batches.

Measures, in one run, a reference-A-sized Transformer (9.04M parameters) on Multi30k German->English (ATTNVIZ_DATA)
for ``--steps`` optimizer steps with each batching, 128 sentence pairs per batch, and reports non-pad target
tokens per second and their ratio (target: bucketed at least 1.3x faster).

    python benchmarks/bench_train.py [--steps 30] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from attnviz.engine.batching import batch_tensors, make_batches
from attnviz.engine.metrics import smoothed_loss
from attnviz.engine.presets import get_preset
from attnviz.engine.training import prepare
from attnviz.engine.translator import build_model
from attnviz.engine.vocab import PAD_ID


def measure(model, opt, data, batches, steps: int) -> dict:
    model.train()
    times, tokens = [], 0
    for indices in batches[:steps]:
        src, tgt = batch_tensors([data.train[i] for i in indices])
        start = time.perf_counter()
        loss = smoothed_loss(model(src, tgt[:, :-1]), tgt[:, 1:], 0.0)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - start)
        tokens += int((tgt[:, 1:] != PAD_ID).sum())
    return {"tokens_per_s": round(tokens / sum(times)), "step_ms_median": round(statistics.median(times) * 1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    recipe = get_preset("multi30k-de-en")
    data = prepare(recipe)
    model = build_model(recipe.model_config(len(data.src_vocab), len(data.tgt_vocab)))
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    lengths = [(len(s), len(t)) for s, t in data.train]
    bucketed = make_batches(lengths, recipe.train, seed=1)
    random_batches = make_batches(lengths, recipe.train.replace(bucket=False), seed=1)
    measure(model, opt, data, random_batches, 3)  # warm-up
    result_random = measure(model, opt, data, random_batches, args.steps)
    result_bucketed = measure(model, opt, data, bucketed, args.steps)
    print(json.dumps({
        "model_parameters": sum(p.numel() for p in model.parameters()),
        "threads": args.threads,
        "steps_each": args.steps,
        "batch": "128 sentence pairs",
        "bucketed": result_bucketed,
        "random_padded": result_random,
        "speedup_bucketed_vs_random": round(result_bucketed["tokens_per_s"] / result_random["tokens_per_s"], 2),
        "target_speedup_at_least": 1.3,
    }, indent=2))


if __name__ == "__main__":
    main()
