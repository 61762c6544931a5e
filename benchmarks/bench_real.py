"""The real GGUF models of the tests (``tests/real_weights.py``: SmolLM2-135M-Instruct Q4_1, Gemma 3 270M Q4_K_M),
decoded step by step with every attention map captured by attnviz and by transformers loading the same file
(``gguf_file=``, eager attention, ``output_attentions=True``), each side in a process of its own so that each peak
resident memory is its own, the sides interleaved (``--rounds`` times each, alternating): time to open the file,
milliseconds to the first token and per later token, peak RSS, and the ratios of the medians. Printed as JSON.

    python benchmarks/bench_real.py [--model smollm2|gemma3|both] [--tokens 24] [--repeats 3] [--rounds 2]
                                    [--threads 2] [--dtype float32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from llm_large import SENTENCE, clock, peak_rss_mib  # noqa: E402

MESSAGE = "Translate the following text from German into English.\nGerman: {}\nEnglish:"


def _attnviz(path: Path, dtype: str, tokens: int, repeats: int) -> dict:
    from attnviz.engine.config import DecodeConfig
    from attnviz.engine.events import DecodeStep
    from attnviz.engine.loading import load_translator

    start = clock("cpu")
    translator = load_translator(path, dtype)
    loaded = clock("cpu") - start
    decode = DecodeConfig(max_len=tokens)

    def once() -> tuple[float, float, int]:
        start, first, count = clock("cpu"), 0.0, 0
        for event in translator.steps(SENTENCE, decode):
            if isinstance(event, DecodeStep):
                count += 1
                first = first or clock("cpu") - start
        return first, clock("cpu") - start, count

    return {"load_s": loaded, "runs": [once() for _ in range(repeats + 1)][1:]}


def _transformers(path: Path, dtype: str, tokens: int, repeats: int) -> dict:
    import torch
    import transformers

    start = clock("cpu")
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=getattr(torch, dtype), attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    loaded = clock("cpu") - start
    if tokenizer.chat_template:
        text = tokenizer.apply_chat_template([{"role": "user", "content": MESSAGE.format(SENTENCE)}],
                                             tokenize=False, add_generation_prompt=True)
        ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
    else:
        ids = torch.tensor([tokenizer(MESSAGE.format(SENTENCE))["input_ids"]])

    def generate(n: int) -> tuple[float, int]:
        start = clock("cpu")
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n,
                                 min_new_tokens=n, output_attentions=True, return_dict_in_generate=True)
        return clock("cpu") - start, out.sequences.size(1) - ids.size(1)

    def once() -> tuple[float, float, int]:
        first, _ = generate(1)
        total, count = generate(tokens)
        return first, total, count

    return {"load_s": loaded, "runs": [once() for _ in range(repeats + 1)][1:]}


def child(side: str, path: str, dtype: str, tokens: int, repeats: int, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    result = (_attnviz if side == "attnviz" else _transformers)(Path(path), dtype, tokens, repeats)
    result["peak_rss_mib"] = peak_rss_mib()
    print(json.dumps(result))


def _side(side: str, path: Path, args: argparse.Namespace) -> dict:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from bench_real import child; "
            "child(sys.argv[2], sys.argv[3], sys.argv[4], *map(int, sys.argv[5:8]))")
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), side, str(path), args.dtype,
                          str(args.tokens), str(args.repeats), str(args.threads)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{side} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _figures(results: list[dict]) -> dict:
    runs = [r for result in results for r in result["runs"]]
    return {"load_s": round(statistics.median(r["load_s"] for r in results), 2),
            "first_token_ms": round(statistics.median(r[0] * 1000 for r in runs), 1),
            "ms_per_token": round(statistics.median((t - f) * 1000 / max(n - 1, 1) for f, t, n in runs), 1),
            "tokens": runs[0][2], "peak_rss_mib": round(statistics.median(r["peak_rss_mib"] for r in results))}


def measure(name: str, args: argparse.Namespace) -> dict:
    from tests.real_weights import gemma3_gguf, smollm2_gguf

    path = smollm2_gguf() if name == "smollm2" else gemma3_gguf()
    results: dict[str, list[dict]] = {"attnviz": [], "transformers": []}
    for _ in range(args.rounds):  # interleaved: a machine's slow minute falls on both sides
        for side in results:
            results[side].append(_side(side, path, args))
    ours, theirs = _figures(results["attnviz"]), _figures(results["transformers"])
    return {"model": path.name, "dtype": args.dtype, "attnviz": ours, "transformers_eager_output_attentions": theirs,
            "attnviz_over_transformers": {k: round(ours[k] / theirs[k], 3) for k in
                                          ("load_s", "first_token_ms", "ms_per_token", "peak_rss_mib")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["smollm2", "gemma3", "both"], default="both")
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = parser.parse_args()
    names = ["smollm2", "gemma3"] if args.model == "both" else [args.model]
    print(json.dumps({"benchmark": "bench_real", "threads": args.threads, "tokens": args.tokens,
                      "models": [measure(n, args) for n in names], "load_average": os.getloadavg()}, indent=2))


if __name__ == "__main__":
    main()
