"""Training throughput, printed as JSON: length-bucketed against random padded batches, and 1 against 2 processes.

Measures a reference-A-sized Transformer (9.04M parameters) on Multi30k German->English (ATTNVIZ_DATA), 128
sentence pairs per batch, in non-pad target tokens per second:

* ``bucketing``: ``--steps`` optimizer steps with each batching in one process (target: bucketed at least 1.3x).
* ``processes``: DistributedDataParallel as ``attnviz train`` runs it, through torchrun (gloo on CPU, one thread
  per process), with 1 and 2 processes (``--processes``); each step takes one bucketed batch per process, so
  tokens/s counts every process's tokens over the wall time of the same number of steps. With a CUDA GPU at hand
  the same is measured on it (one process; with several GPUs one process per GPU over nccl; bf16 autocast too),
  and the GPU is named.

``--mode cuda`` measures only the GPU's figures (float32 and bf16 autocast, one process). ``--tokenized`` reads
the corpus from files whose lines are already spaCy's tokens joined by spaces (``--write-tokenized DIR`` writes them
from ATTNVIZ_DATA's Multi30k), with whitespace tokenizers: the same tokens and batches without spaCy, which a GPU
machine may lack (``benchmarks/gpu_check.sh``).

    python benchmarks/bench_train.py [--steps 30] [--threads 2] [--mode all|bucketing|processes|cuda]
        [--processes 1,2] [--tokenized]
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import statistics
import subprocess
import sys
import time

import torch
from torch.nn.attention import sdpa_kernel

from attnviz.engine.corpus.batching import batch_tensors, make_batches
from attnviz.engine.metrics import smoothed_loss
from attnviz.engine.text.vocab import PAD_ID
from attnviz.engine.training.loop import TRAIN_ATTENTION
from attnviz.engine.training.prepare import prepare
from attnviz.engine.training.presets import Recipe, get_preset
from attnviz.engine.translator import build_model

PRESET = "multi30k-de-en"
TOKENIZED = False  # --tokenized: the corpus files hold spaCy's tokens joined by spaces


def recipe() -> Recipe:
    """Reference A's recipe; with ``TOKENIZED`` its tokenizers split at spaces (the files are spaCy's tokens)."""
    found = get_preset(PRESET)
    if not TOKENIZED:
        return found
    return dataclasses.replace(found, src_tokenizer=dataclasses.replace(found.src_tokenizer, mode="whitespace"),
                               tgt_tokenizer=dataclasses.replace(found.tgt_tokenizer, mode="whitespace"))


def write_tokenized(out: str) -> dict:
    """Every Multi30k file of the recipe's languages in ATTNVIZ_DATA, tokenized by the recipe's spaCy tokenizers,
    one line per line (an empty line stays empty), gzipped into ``out`` under the same names."""
    found, data = get_preset(PRESET), os.environ.get("ATTNVIZ_DATA", ".")
    os.makedirs(out, exist_ok=True)
    written = {}
    for spec in (found.src_tokenizer, found.tgt_tokenizer):
        for name in sorted(os.listdir(data)):
            if name.startswith("multi30k_") and name.endswith(f".{spec.lang}.gz"):
                with gzip.open(os.path.join(data, name), "rt", encoding="utf-8") as f:
                    lines = [" ".join(spec.tokenize(line.rstrip("\n"))) for line in f]
                with gzip.open(os.path.join(out, name), "wt", encoding="utf-8") as f:
                    f.writelines(line + "\n" for line in lines)
                written[name] = len(lines)
    return written


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


def bucketing(steps: int, threads: int) -> dict:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    found = recipe()
    data = prepare(found)
    model = build_model(found.model_config(len(data.src_vocab), len(data.tgt_vocab)))
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    lengths = [(len(s), len(t)) for s, t in data.train]
    bucketed = make_batches(lengths, found.train, seed=1)
    random_batches = make_batches(lengths, found.train.replace(bucket=False), seed=1)
    measure(model, opt, data, random_batches, 3)  # warm-up
    result_random = measure(model, opt, data, random_batches, steps)
    result_bucketed = measure(model, opt, data, bucketed, steps)
    return {
        "model_parameters": sum(p.numel() for p in model.parameters()),
        "threads": threads,
        "steps_each": steps,
        "batch": "128 sentence pairs",
        "bucketed": result_bucketed,
        "random_padded": result_random,
        "speedup_bucketed_vs_random": round(result_bucketed["tokens_per_s"] / result_random["tokens_per_s"], 2),
        "target_speedup_at_least": 1.3,
    }


def worker(steps: int, device_name: str, bf16: bool) -> None:
    """One process of a torchrun run (or alone): ``steps`` timed DDP steps after 3 warm-up steps."""
    from attnviz.engine.training.distributed import join

    torch.set_num_threads(1)
    ranks, device = join(device_name)
    torch.manual_seed(0)
    found = recipe()
    data = prepare(found)
    model = build_model(found.model_config(len(data.src_vocab), len(data.tgt_vocab))).to(device)
    step_model, opt = ranks.wrap(model), torch.optim.Adam(model.parameters(), lr=5e-4)
    batches = make_batches([(len(s), len(t)) for s, t in data.train], found.train, seed=1)
    model.train()
    tokens, start = 0, 0.0
    for step in range(steps + 3):
        if step == 3:
            ranks.agree(False)  # every process starts the clock together
            start, tokens = time.perf_counter(), 0
        src, tgt = (t.to(device) for t in batch_tensors([data.train[i] for i in batches[step * ranks.world
                                                                                         + ranks.rank]]))
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16), sdpa_kernel(TRAIN_ATTENTION):
            loss = smoothed_loss(step_model(src, tgt[:, :-1]), tgt[:, 1:], 0.0)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += int((tgt[:, 1:] != PAD_ID).sum())
    _, total = ranks.mean_loss(loss, tokens)  # sums the tokens of every process (and waits for the slowest)
    wall = time.perf_counter() - start
    if ranks.is_main:
        print(json.dumps({"tokens_per_s": round(total / wall), "step_ms": round(wall / steps * 1000, 1),
                          "global_batch": f"{ranks.world} x 128 sentence pairs"}), flush=True)
    ranks.close()


def run_processes(n: int, steps: int, device: str, bf16: bool = False) -> dict:
    script = [os.path.abspath(__file__), "--worker", "--steps", str(steps), "--device", device] + (
        ["--bf16"] if bf16 else []) + (["--tokenized"] if TOKENIZED else [])
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n)] if n > 1 else []
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, *launcher, *script], capture_output=True, text=True, env=env)
    if done.returncode:
        return {"error": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _label(n: int) -> str:
    return f"{n} process" + ("es" if n > 1 else "")


def cuda_figures(steps: int) -> dict:
    """One process per GPU (one, and all when there are several) in float32, and one in bf16 autocast."""
    gpus = torch.cuda.device_count()
    return {"gpu": torch.cuda.get_device_name(0), "gpus": gpus, "steps": steps, "torch": torch.__version__,
            **{_label(n): run_processes(n, steps, "cuda") for n in sorted({1, gpus})},
            "1 process bf16": run_processes(1, steps, "cuda", bf16=True)}


def processes(steps: int, counts: list[int]) -> dict:
    result = {"cpu": {"threads_per_process": 1, "steps": steps, "cpu_cores": os.cpu_count(),
                      **{_label(n): run_processes(n, steps, "cpu") for n in counts}}}
    if torch.cuda.is_available():
        result["cuda"] = cuda_figures(steps)
    for section in result.values():
        one, two = section.get(_label(1), {}), section.get(_label(2), {})
        if "tokens_per_s" in one and "tokens_per_s" in two:
            section["speedup_2_vs_1"] = round(two["tokens_per_s"] / one["tokens_per_s"], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the bucketing comparison")
    parser.add_argument("--mode", choices=["all", "bucketing", "processes", "cuda"], default="all")
    parser.add_argument("--tokenized", action="store_true",
                        help="the corpus files hold spaCy's tokens joined by spaces: split them at spaces")
    parser.add_argument("--write-tokenized", metavar="DIR",
                        help="write ATTNVIZ_DATA's Multi30k files tokenized into DIR (for --tokenized), and stop")
    parser.add_argument("--processes", default="1,2", help="process counts to compare on CPU")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cpu", help=argparse.SUPPRESS)
    parser.add_argument("--bf16", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    global TOKENIZED
    TOKENIZED = args.tokenized
    if args.write_tokenized:
        print(json.dumps({"written": write_tokenized(args.write_tokenized)}, indent=2))
        return
    if args.mode == "cuda":
        print(json.dumps({"cuda": cuda_figures(args.steps) if torch.cuda.is_available() else
                          {"error": "no CUDA GPU: torch sees none"}}, indent=2))
        return
    if args.worker:
        worker(args.steps, args.device, args.bf16)
        return
    report = {}
    if args.mode in ("all", "bucketing"):
        report.update(bucketing(args.steps, args.threads))
    if args.mode in ("all", "processes"):
        report["processes"] = processes(args.steps, [int(n) for n in args.processes.split(",")])
        report["load_average_1min_after"] = round(os.getloadavg()[0], 2)  # other jobs on the machine skew the figures
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
