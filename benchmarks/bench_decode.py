"""Decoding speed on CPU, printed as JSON (never asserted in tests: machines are shared and noisy).

Measures, in one run, on a reference-A-sized Transformer (random weights unless --model is given):
- step-by-step greedy decoding of one sentence with full attention capture, exactly ``--tokens`` output tokens,
  cached keys/values versus recomputing the whole prefix each step (median of ``--repeats`` runs, and the ratio);
- batched translation of 1,000 sentences (Multi30k test sources when ATTNVIZ_DATA is set, else synthetic);
- step-by-step decoding with full capture on a MarianMT-sized model (kind ``marian``: 6+6 layers, d 512, 8 heads,
  ff 2048, vocabulary 58,101 pieces plus attnviz's <sos>, shared and tied embeddings; random weights): milliseconds
  per step, median of ``--repeats`` runs (skip with ``--no-marian``);
- exploring decoding (issue 18) on the first ``--explore`` batch sentences: greedy with full capture
  (``Translator.translate``) against beam 5 with every candidate's attention (``beam_steps`` into a ``SearchTree``),
  and re-decoding a sentence greedily after a head toggle (one cross-attention head off), milliseconds per sentence,
  medians (skip with ``--explore 0``).

``--large nllb`` or ``--large opus-big`` measures only that wider model (issue 26), in a process of its own so that
the peak resident memory is its own: step-by-step decoding with full capture of an NLLB-200-600M-sized model (12+12
pre-norm layers, d 1024, 16 heads, ff 4096, vocabulary 256,206, shared and tied embeddings, about 615M parameters,
2.5 GB in float32) or an OPUS-MT-big-sized one (6+6 post-norm layers, d 1024, 16 heads, ff 4096, relu, vocabulary
57,000); both are native attnviz configs with random weights (no ``transformers``), milliseconds per step (median of
``--repeats`` runs) and the process's peak RSS.

With random weights ``<eos>`` is suppressed so every sentence decodes the full ``--tokens`` steps: a harder case
than real translation, whose outputs average about 13 tokens.

    python benchmarks/bench_decode.py [--model CKPT] [--tokens 30] [--repeats 7] [--threads 2]
    python benchmarks/bench_decode.py --large nllb --repeats 3   # check free memory first: it needs ~3.5 GB
    python benchmarks/bench_decode.py --large qwen2.5-0.5b --tokens 20 --repeats 3 --threads 1

``--large qwen2.5-0.5b``, ``llama-3.2-1b`` or ``gemma-3-1b`` measures a decoder-only LLM of that shape (random
weights, written once by transformers into a cache folder) against transformers (eager, ``output_attentions``):
time to the first token, milliseconds per later token and each process's peak RSS, and their ratios
(``benchmarks/llm_large.py``); with ``--device cuda`` both sides run on the GPU, each side's peak GPU memory beside
its peak RSS (``benchmarks/gpu_check.sh`` runs it on a lent GPU machine):

    python benchmarks/bench_decode.py --large llama-3.2-1b --dtype bfloat16 --device cuda --tokens 30 --repeats 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import statistics
import time
from pathlib import Path

import torch
from llm_large import SHAPES, large_llm_figures  # benchmarks/ is the script's own folder, first on sys.path

from attnviz.engine.config import DecodeConfig, ModelConfig
from attnviz.engine.heads import HeadRef
from attnviz.engine.loading import load_translator
from attnviz.engine.models.transformer import Transformer
from attnviz.engine.search.tree import SearchTree
from attnviz.engine.text.tokenize import TokenizerSpec
from attnviz.engine.text.vocab import EOS_ID, Vocab
from attnviz.engine.translator import Translator, build_model

SENTENCE = "Ein kleines Mädchen in einem rosa Kleid klettert eine Treppe zu einem Spielhaus hinauf ."


def random_translator() -> Translator:
    torch.manual_seed(0)
    words = [f"w{i}" for i in range(8000)]
    src_words = SENTENCE.lower().split() + words
    src_vocab, tgt_vocab = Vocab.build([src_words[:7849]]), Vocab.build([words[:5889]])
    model = Transformer(ModelConfig(len(src_vocab), len(tgt_vocab)))
    with torch.no_grad():
        model.out_proj.bias[EOS_ID] = -1e4  # never stop early: every sentence decodes all its steps
    return Translator(model, src_vocab, tgt_vocab, TokenizerSpec("de"), TokenizerSpec("en"))


def marian_translator() -> Translator:
    """A random model of OPUS-MT's size (what ``attnviz convert`` makes of Helsinki-NLP/opus-mt-de-en)."""
    torch.manual_seed(0)
    pieces = SENTENCE.lower().split() + [f"p{i}" for i in range(58_097 - len(SENTENCE.split()))]
    vocab = Vocab.build([pieces])
    cfg = ModelConfig(len(vocab), len(vocab), kind="marian", d_model=512, enc_layers=6, dec_layers=6, heads=8,
                      ff_dim=2048, dropout=0.0, positions="sinusoidal-halves", max_positions=512, activation="swish",
                      tie_output=True, share_embeddings=True, scale_embedding=True)
    model = build_model(cfg)
    with torch.no_grad():
        model.out_proj.bias[EOS_ID] = -1e4
    spec = TokenizerSpec("de", mode="whitespace")
    return Translator(model, vocab, vocab, spec, TokenizerSpec("en", mode="whitespace"), {"random": True})


LARGE = {  # issue 26's wider models, as native attnviz configs (random weights)
    "nllb": dict(vocab=256_206, kind="transformer", enc_layers=12, dec_layers=12, norm="pre", positions="sinusoidal",
                 max_positions=1024, title="NLLB-200-600M-sized"),
    "opus-big": dict(vocab=57_000, kind="marian", enc_layers=6, dec_layers=6, norm="post",
                     positions="sinusoidal-halves", max_positions=1024, title="OPUS-MT-big-sized"),
}


def large_translator(name: str) -> Translator:
    """A random model of the size ``LARGE[name]`` gives: d 1024, 16 heads, ff 4096, relu, shared tied embeddings."""
    spec = dict(LARGE[name])
    torch.manual_seed(0)
    pieces = SENTENCE.lower().split() + [f"p{i}" for i in range(spec["vocab"] - 4 - len(SENTENCE.split()))]
    vocab = Vocab.build([pieces])
    cfg = ModelConfig(len(vocab), len(vocab), kind=spec["kind"], d_model=1024, enc_layers=spec["enc_layers"],
                      dec_layers=spec["dec_layers"], heads=16, ff_dim=4096, dropout=0.0, positions=spec["positions"],
                      max_positions=spec["max_positions"], norm=spec["norm"], activation="relu", tie_output=True,
                      share_embeddings=True, scale_embedding=True)
    model = build_model(cfg)
    with torch.no_grad():
        model.out_proj.bias[EOS_ID] = -1e4
    return Translator(model, vocab, vocab, TokenizerSpec("de", mode="whitespace"),
                      TokenizerSpec("en", mode="whitespace"), {"random": True})


def large_figures(name: str, tokens: int, repeats: int) -> dict:
    """ms per step with full capture (every layer's and head's maps) and the process's peak RSS."""
    start = time.perf_counter()
    translator = large_translator(name)
    built_s = time.perf_counter() - start
    time_steps(translator, tokens, False)  # warm-up
    runs = [time_steps(translator, tokens, False) / tokens for _ in range(repeats)]
    parameters = sum(p.numel() for p in {id(p): p for p in translator.model.parameters()}.values())
    return {"model": f"{LARGE[name]['title']} random weights (native attnviz config), <eos> suppressed",
            "parameters": parameters, "float32_gb": round(parameters * 4 / 1e9, 2), "build_seconds": round(built_s, 1),
            "output_tokens": tokens, "ms_per_step_median": round(statistics.median(runs), 1),
            "ms_per_step_runs": [round(r, 1) for r in runs],
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}


def sources(n: int) -> tuple[list[str], str]:
    data = os.environ.get("ATTNVIZ_DATA")
    path = Path(data or ".") / "multi30k_test_2016_flickr.de.gz"
    if data and path.exists():
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [line.strip() for line in f][:n], "multi30k test_2016_flickr (de)"
    rng = random.Random(0)
    vocab = SENTENCE.lower().split()
    return [" ".join(rng.choices(vocab, k=rng.randint(6, 20))) for _ in range(n)], "synthetic"


def time_steps(translator: Translator, tokens: int, recompute: bool) -> float:
    start = time.perf_counter()
    steps = sum(1 for _ in translator.steps(SENTENCE, DecodeConfig(max_len=tokens), recompute=recompute)) - 1
    elapsed = (time.perf_counter() - start) * 1000
    assert steps == tokens or not translator.metadata.get("random"), steps
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="checkpoint to measure instead of random reference-A weights")
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-marian", action="store_true", help="skip the MarianMT-sized measurement")
    parser.add_argument("--explore", type=int, default=20, help="sentences for the beam / head-toggle figures")
    parser.add_argument("--large", choices=sorted(LARGE) + sorted(SHAPES),
                        help="measure only this wider model (and its peak memory); a decoder-only LLM shape is "
                             "measured against transformers (eager, every attention map), each in its own process")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                        help="an LLM shape's precision on both sides")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="where an LLM shape runs, on both sides (the other measurements run on the CPU)")
    args = parser.parse_args()
    if args.device != "cpu" and args.large not in SHAPES:
        parser.error("--device cuda measures a decoder-only LLM shape (--large " + "|".join(sorted(SHAPES)) + ")")
    torch.set_num_threads(args.threads)
    if args.large in SHAPES:
        figures = large_llm_figures(args.large, args.tokens, args.repeats, args.threads, args.dtype, args.device)
        print(json.dumps({"threads": args.threads, **figures}, indent=2))
        return
    if args.large:
        print(json.dumps({"threads": args.threads, **large_figures(args.large, args.tokens, args.repeats)}, indent=2))
        return
    translator = load_translator(args.model) if args.model else random_translator()
    translator.metadata.setdefault("random", not args.model)
    translator.src_spec.prepare()
    time_steps(translator, args.tokens, False)  # warm-up
    cached = [time_steps(translator, args.tokens, False) for _ in range(args.repeats)]
    recomputed = [time_steps(translator, args.tokens, True) for _ in range(args.repeats)]
    texts, origin = sources(args.sentences)
    start = time.perf_counter()
    outputs = translator.translate_batch_tokens(texts, DecodeConfig(max_len=args.tokens if not args.model else 50))
    batch_s = time.perf_counter() - start
    max_len = args.tokens if not args.model else 50
    explore = exploration_figures(translator, texts[: args.explore], max_len) if args.explore else {}
    marian = {} if args.no_marian else marian_figures(args.tokens, args.repeats)
    print(json.dumps({
        "model": args.model or "random reference-A weights (9,038,341 parameters), <eos> suppressed",
        "threads": args.threads,
        "output_tokens": args.tokens,
        "steps_cached_ms_median": round(statistics.median(cached), 1),
        "steps_recompute_ms_median": round(statistics.median(recomputed), 1),
        "speedup_cached_vs_recompute": round(statistics.median(recomputed) / statistics.median(cached), 2),
        "batch_sentences": len(texts),
        "batch_source": origin,
        "batch_output_tokens_mean": round(sum(map(len, outputs)) / len(outputs), 1),
        "batch_seconds": round(batch_s, 2),
        **explore,
        **marian,
        "targets": {"speedup_at_least": 1.5, "batch_seconds_under": 5.0},
    }, indent=2))


def _ms(run) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1000


def _beam_tree(translator: Translator, text: str, decode: DecodeConfig) -> SearchTree:
    events = translator.beam_steps(text, decode)
    tree = SearchTree(next(events))
    for event in events:
        tree.add(event)
    tree.translation(tree.chosen, translator.detokenize)  # the chosen hypothesis' maps, as the app shows them
    return tree


def exploration_figures(translator: Translator, texts: list[str], max_len: int) -> dict:
    """Per sentence: greedy with capture, beam 5 with every candidate's attention, greedy with one head off."""
    greedy, beam5 = DecodeConfig(max_len=max_len), DecodeConfig(max_len=max_len, beam=5)
    layers = translator.kind.layout(translator.config)["cross"][0]
    toggled = greedy.replace(heads_off=(HeadRef("cross", layers - 1, 0),))
    runs = {"greedy": lambda t: translator.translate(t, greedy), "beam5": lambda t: _beam_tree(translator, t, beam5),
            "toggle": lambda t: translator.translate(t, toggled)}
    for run in runs.values():  # warm-up
        run(texts[0])
    figures: dict[str, list[float]] = {name: [] for name in runs}
    for text in texts:  # interleaved, so a busy moment of a shared machine weighs on all three alike
        for name, run in runs.items():
            figures[name].append(_ms(lambda r=run, t=text: r(t)))
    nodes = [len(_beam_tree(translator, t, beam5).nodes) for t in texts[:5]]
    return {"explore_sentences": len(texts),
            "greedy_capture_ms_per_sentence_median": round(statistics.median(figures["greedy"]), 1),
            "beam5_capture_ms_per_sentence_median": round(statistics.median(figures["beam5"]), 1),
            "beam5_vs_greedy": round(statistics.median(figures["beam5"]) / statistics.median(figures["greedy"]), 2),
            "beam5_tree_nodes_first5": nodes,
            "head_toggle_redecode_ms_median": round(statistics.median(figures["toggle"]), 1),
            "head_toggled": f"cross:{layers}.1"}


def marian_figures(tokens: int, repeats: int) -> dict:
    translator = marian_translator()
    time_steps(translator, tokens, False)  # warm-up
    runs = [time_steps(translator, tokens, False) / tokens for _ in range(repeats)]
    return {"marian_sized_parameters": sum(p.numel() for p in {id(p): p for p in translator.model.parameters()}
                                           .values()),
            "marian_sized_ms_per_step_median": round(statistics.median(runs), 2),
            "marian_sized_ms_per_step_runs": [round(r, 2) for r in runs]}


if __name__ == "__main__":
    main()
