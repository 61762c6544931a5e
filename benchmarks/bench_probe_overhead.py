"""What the probe points cost a decode: the code before a change and after it, side by side in one process,
interleaved, printed as JSON.

The ``--before`` checkout's ``attnviz`` package is copied under the name ``attnviz_before`` (its imports renamed)
so that both versions load into this process; each decode of one version is followed by the same decode of the
other (the order alternating), so the two share the machine's state and each pair gives a ratio. Measured with one
thread: step-by-step greedy decoding (``Translator.steps``, every attention map captured, ``--tokens`` steps) of the
bundled de-en model and of a MarianMT-sized random model (kind ``marian``: 6+6 layers, d 512, 8 heads, 58k
vocabulary, ``<eos>`` suppressed so that every decode runs all its steps). It prints each version's median
milliseconds per step, the median of the paired ratios (after / before) and the load average before and after.

``--llm FOLDER`` adds a decoder-only LLM folder (``llm_large.py`` writes random ones of real shapes), decoded the
same way in both versions at float32.

    python benchmarks/bench_probe_overhead.py --before /path/to/old/checkout [--repeats 21] [--tokens 30] [--no-marian]
        [--llm FOLDER]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import torch

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "Ein kleines Mädchen in einem rosa Kleid klettert eine Treppe zu einem Spielhaus hinauf ."
RENAME = [(re.compile(r"\battnviz\."), "attnviz_before."), (re.compile(r"^(\s*)import attnviz$", re.M),
                                                                  r"\1import attnviz_before"),
          (re.compile(r"^(\s*)from attnviz import", re.M), r"\1from attnviz_before import")]


def renamed_copy(before: Path, into: Path) -> None:
    """``before``'s attnviz package as ``attnviz_before`` under ``into``."""
    target = into / "attnviz_before"
    shutil.copytree(before / "attnviz", target, ignore=shutil.ignore_patterns("__pycache__"))
    for path in target.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for pattern, replacement in RENAME:
            text = pattern.sub(replacement, text)
        path.write_text(text, encoding="utf-8")


def module(package: str, name: str) -> ModuleType:
    return importlib.import_module(f"{package}.{name}")


def marian_sized(package: str):
    """A random model of OPUS-MT's size, as bench_decode.py builds it, in ``package``'s code."""
    config, vocab_mod, tok = (module(package, f"engine.{m}") for m in ("config", "text.vocab", "text.tokenize"))
    translator_mod = module(package, "engine.translator")
    torch.manual_seed(0)
    pieces = SENTENCE.lower().split() + [f"p{i}" for i in range(58_097 - len(SENTENCE.split()))]
    vocab = vocab_mod.Vocab.build([pieces])
    cfg = config.ModelConfig(len(vocab), len(vocab), kind="marian", d_model=512, enc_layers=6, dec_layers=6, heads=8,
                             ff_dim=2048, dropout=0.0, positions="sinusoidal-halves", max_positions=512,
                             activation="swish", tie_output=True, share_embeddings=True, scale_embedding=True)
    model = translator_mod.build_model(cfg)
    with torch.no_grad():
        model.out_proj.bias[vocab_mod.EOS_ID] = -1e4
    spec = tok.TokenizerSpec("de", mode="whitespace")
    return translator_mod.Translator(model, vocab, vocab, spec, tok.TokenizerSpec("en", mode="whitespace"),
                                     {"random": True})


def bundled(package: str):
    return module(package, "engine.loading").load_translator(str(ROOT / "models" / "de-en-multi30k.safetensors"))


def llm_folder(folder: Path):
    """A maker of ``folder``'s LLM in a package's code (float32, the CPU)."""
    def make(package: str):
        return module(package, "engine.loading").load_translator(str(folder), "float32")

    return make


def ms_per_step(package: str, translator, tokens: int) -> float:
    decode = module(package, "engine.config").DecodeConfig(max_len=tokens)
    start = time.perf_counter()
    steps = sum(1 for _ in translator.steps(SENTENCE, decode)) - 1
    return (time.perf_counter() - start) * 1000 / max(steps, 1)


def compare(make, tokens: int, repeats: int) -> dict:
    translators = {package: make(package) for package in ("attnviz_before", "attnviz")}
    for package, translator in translators.items():
        translator.src_spec.prepare()
        ms_per_step(package, translator, tokens)  # warm-up
    times: dict[str, list[float]] = {"attnviz_before": [], "attnviz": []}
    for i in range(repeats):
        for package in (("attnviz_before", "attnviz") if i % 2 == 0 else ("attnviz", "attnviz_before")):
            times[package].append(ms_per_step(package, translators[package], tokens))
    ratios = [a / b for a, b in zip(times["attnviz"], times["attnviz_before"])]
    return {"before_ms_per_step_median": round(statistics.median(times["attnviz_before"]), 3),
            "after_ms_per_step_median": round(statistics.median(times["attnviz"]), 3),
            "paired_ratio_median": round(statistics.median(ratios), 4),
            "paired_ratio_quartiles": [round(q, 4) for q in statistics.quantiles(ratios, n=4)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the code before the change")
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--no-marian", action="store_true", help="skip the MarianMT-sized model")
    parser.add_argument("--llm", type=Path, help="a decoder-only LLM folder to decode in both versions too")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        renamed_copy(args.before.resolve(), Path(tmp))
        sys.path.insert(0, tmp)
        figures = {"bundled_de_en": compare(bundled, args.tokens, args.repeats)}
        if not args.no_marian:
            figures["marian_sized"] = compare(marian_sized, args.tokens, args.repeats)
        if args.llm is not None:
            figures["llm"] = {"folder": args.llm.name, **compare(llm_folder(args.llm), args.tokens, args.repeats)}
    print(json.dumps({"threads": 1, "tokens": args.tokens, "repeats": args.repeats, "capture": "every map",
                      "load_average_before": [round(x, 2) for x in load_start],
                      "load_average_after": [round(x, 2) for x in os.getloadavg()], **figures}, indent=2))


if __name__ == "__main__":
    main()
