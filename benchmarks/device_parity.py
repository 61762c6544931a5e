"""Whether a decoder-only LLM decodes on the GPU as on the CPU, printed as JSON (``benchmarks/gpu_check.sh``).

A small random Qwen2-shaped folder (``llm_large.write_folder``: 2 layers, d 64, 4 query heads sharing 2 key/value
heads) is loaded at float32 on the CPU and on ``--device`` (``auto``: the GPU when torch sees one), then both decode
the same prompt greedily step by step with every attention map captured, by beam search (width 3, every
candidate's maps), with a head switched off, and in a batch: the tokens must agree, and the largest difference
of any map (kept in float16) and of any step's probability is reported. On a machine without a GPU both sides run
on the CPU and agree exactly.

    python benchmarks/device_parity.py [--device auto|cuda] [--tokens 12]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np
from llm_large import SENTENCE, write_folder  # benchmarks/ is the script's own folder, first on sys.path

from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import BeamStep
from attnviz.engine.heads import HeadRef
from attnviz.engine.loading import load_translator
from attnviz.engine.translator import Translator


def _greedy(translator: Translator, decode: DecodeConfig) -> tuple[list[str], list[np.ndarray], list[float]]:
    found = translator.translate(SENTENCE, decode)
    maps = [found.attention[kind] for kind in sorted(found.attention)]
    return list(found.tokens), maps, list(found.probabilities)


def _beam(translator: Translator, decode: DecodeConfig) -> tuple[list[str], list[np.ndarray]]:
    tokens, maps = [], []
    for event in translator.beam_steps(SENTENCE, decode):
        if isinstance(event, BeamStep):
            for node in event.nodes:
                tokens.append(f"{node.parent}>{node.step.token}:{node.status}")
                maps += [m for m in (node.step.cross_attention, node.step.self_attention) if m is not None]
    return tokens, maps


def _largest(first: list[np.ndarray], second: list[np.ndarray]) -> float | None:
    if len(first) != len(second) or any(a.shape != b.shape for a, b in zip(first, second, strict=True)):
        return None  # the searches took different paths: the tokens say where
    return max((float(np.abs(a.astype(np.float32) - b.astype(np.float32)).max()) for a, b in zip(first, second,
                                                                                                 strict=True)),
               default=0.0)


def compare(device: str, tokens: int) -> dict:
    root = Path(os.environ.get("ATTNVIZ_BENCH_CACHE", Path(tempfile.gettempdir()) / "attnviz-bench"))
    root.mkdir(parents=True, exist_ok=True)
    folder = write_folder("tiny", root, "float32")
    cpu, there = load_translator(folder, "float32"), load_translator(folder, "float32", device)
    greedy, beam = DecodeConfig(max_len=tokens), DecodeConfig(max_len=tokens, beam=3)
    masked = greedy.replace(heads_off=(HeadRef("cross", 1, 0),))
    report: dict = {"device": there.device, "tokens_asked": tokens}
    for name, decode in (("greedy", greedy), ("head_off", masked)):
        (a_tok, a_maps, a_p), (b_tok, b_maps, b_p) = _greedy(cpu, decode), _greedy(there, decode)
        report[name] = {"same_tokens": a_tok == b_tok, "tokens": len(a_tok),
                        "largest_map_difference": _largest(a_maps, b_maps),
                        "largest_probability_difference": max((abs(x - y) for x, y in zip(a_p, b_p)), default=0.0)}
    (a_tok, a_maps), (b_tok, b_maps) = _beam(cpu, beam), _beam(there, beam)
    report["beam3"] = {"same_candidates": a_tok == b_tok, "candidates": len(a_tok),
                       "largest_map_difference": _largest(a_maps, b_maps)}
    texts = [SENTENCE, "Ein Mann.", "Zwei Hunde spielen im Schnee."]
    report["batch"] = {"same_tokens": cpu.translate_batch_tokens(texts, greedy) ==
                       there.translate_batch_tokens(texts, greedy), "sentences": len(texts)}
    report["all_same"] = all(part.get("same_tokens", part.get("same_candidates")) for part in report.values()
                             if isinstance(part, dict))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cuda"))
    parser.add_argument("--tokens", type=int, default=12)
    args = parser.parse_args()
    print(json.dumps(compare(args.device, args.tokens), indent=2))


if __name__ == "__main__":
    main()
