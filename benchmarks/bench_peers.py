"""attnviz side by side with the tools a user would otherwise pick, printed as JSON (never asserted in tests).

Builds a random MarianMT folder with ``transformers`` (the test extra) at OPUS-MT's size (d 512, 6+6 layers, 8 heads,
ff 2048, 58,101-piece shared vocabulary; ``--size small`` for a toy one), with ``<eos>`` ruled out by its output
bias so every tool decodes exactly ``--tokens`` tokens, and converts it for CTranslate2 when that imports (the
``peers`` extra, never needed by the app; skipped with a note otherwise). Every figure is a median of ``--repeats``
runs interleaved tool by tool in one process, one thread each (CTranslate2: intra_threads 1); ``paired_ratios``
are the medians of the per-round ratios (each round runs every tool back to back, so a busy moment of a shared
machine hits both sides of a ratio alike), and the load average is printed with each part:

- the plain runtime (``engine.plain``: numpy, no torch), which ``attnviz translate -m FOLDER`` runs without
  capture: greedy, beam 5 and the batch (``*/numpy``) against CTranslate2 and against the torch path;
- greedy with every attention map: ``Translator.translate`` vs ``generate(output_attentions=True)``; without
  capture (``translate_batch``, what ``attnviz translate`` runs) vs CTranslate2;
- beam 5 with every candidate's attention: ``beam_steps`` into a ``SearchTree`` vs ``generate(num_beams=5,
  output_attentions=True)`` and CTranslate2 float32 (``return_attention``: the best hypothesis' map only); beam 5
  without capture (``translate_batch``) vs CTranslate2 without attention, and vs attnviz's capturing beam;
- the plain greedy, beam and batch runs again with the opt-in vocabulary shortlist (``--vmap``) of the target's
  first ``--shortlist`` pieces, against themselves without it and against CTranslate2 without one;
- batch translation of ``--sentences`` sentences (greedy, batches of ``--batch``: the CLI's default): attnviz vs
  ``generate``, attnviz ``--int8`` vs CTranslate2 int8;
- opening, first, through ``loading_probe`` as ``bench_loading`` measures it: open + first token (time, peak
  resident memory) for attnviz, ``transformers`` and ``--baseline`` (a checkout from before issue 29: opening time),
  a cold ``attnviz translate -m FOLDER`` vs the same with ``transformers`` and with CTranslate2 (a cold process
  that imports it, opens the converted folder and translates the same ``--tokens`` tokens);
- the bundled de-en model's greedy step with capture vs a bare-torch floor of the same matmuls (``step_floor``;
  ``--no-floor`` skips it).

    python benchmarks/bench_peers.py [--folder DIR] [--size marian|small] [--repeats 5] [--sentences 200]
        [--tokens 20] [--batch 32] [--shortlist 4000] [--open-repeats 3] [--baseline /tmp/pre29] [--no-floor]
    (CTranslate2: PYTHONPATH=/path/to/ct2-lib, or the peers extra; /tmp/pre29: git worktree add /tmp/pre29 f637f16)
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_decode import _beam_tree as beam_tree  # noqa: E402 (sibling modules, found from the script's folder)
from loading_probe import cold_translate, open_probe  # noqa: E402
from step_floor import floor_figures  # noqa: E402

from attnviz.engine.config import DecodeConfig  # noqa: E402
from attnviz.engine.loading import load_translator  # noqa: E402
from attnviz.engine.models.quantize import quantize_int8  # noqa: E402
from attnviz.engine.plain.translator import open_plain  # noqa: E402
from attnviz.engine.search.shortlist import Shortlist, Vmap  # noqa: E402

SIZES = {"marian": dict(d_model=512, layers=6, heads=8, ffn=2048, vocab=58_101, pieces=8000),
         "small": dict(d_model=32, layers=2, heads=4, ffn=64, vocab=600, pieces=200)}
SENTENCE = "Ein kleines Mädchen in einem rosa Kleid klettert eine Treppe zu einem Spielhaus hinauf."
BATCH = 32


def corpus(n: int) -> list[str]:
    """German sentences: Multi30k's test set when ATTNVIZ_DATA has it, else synthetic ones."""
    path = Path(os.environ.get("ATTNVIZ_DATA", "-")) / "multi30k_test_2016_flickr.de.gz"
    if path.exists():
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [line.strip() for line in f][:n]
    rng, words = random.Random(0), SENTENCE.rstrip(".").split()
    return [" ".join(rng.choices(words, k=rng.randint(6, 20))) + "." for _ in range(n)]


def _spm(lines: list[str], size: int) -> bytes:
    import io

    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=size,
                                             model_type="unigram", character_coverage=1.0, bos_id=-1, eos_id=1,
                                             unk_id=0, pad_id=-1, minloglevel=2, hard_vocab_limit=False)
    return model.getvalue()


def build_folder(folder: Path, size: str) -> Path:
    """A random MarianMT folder as the Hub lays one out (reused when ``folder`` already holds one)."""
    if (folder / "config.json").exists():
        return folder
    import sentencepiece
    from transformers import MarianConfig, MarianMTModel

    dims = SIZES[size]
    spm = _spm(corpus(1000) * 3, dims["pieces"])
    proc = sentencepiece.SentencePieceProcessor()
    proc.LoadFromSerializedProto(spm)
    pieces = ["</s>", "<unk>"] + [p for p in (proc.id_to_piece(i) for i in range(proc.get_piece_size()))
                                  if p not in ("</s>", "<unk>", "<s>")]
    pieces += [f"▁x{i}" for i in range(dims["vocab"] - 1 - len(pieces))] + ["<pad>"]  # Marian: <pad> last
    config = MarianConfig(vocab_size=len(pieces), decoder_vocab_size=len(pieces), d_model=dims["d_model"],
                          encoder_layers=dims["layers"], decoder_layers=dims["layers"],
                          encoder_attention_heads=dims["heads"], decoder_attention_heads=dims["heads"],
                          encoder_ffn_dim=dims["ffn"], decoder_ffn_dim=dims["ffn"], max_position_embeddings=512,
                          pad_token_id=len(pieces) - 1, eos_token_id=0, decoder_start_token_id=len(pieces) - 1,
                          activation_function="swish", scale_embedding=True, share_encoder_decoder_embeddings=True,
                          attn_implementation="eager")
    torch.manual_seed(0)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias[0, 0] = -1e4  # no </s>: every tool decodes the full length
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    for name in ("source.spm", "target.spm"):
        (folder / name).write_bytes(spm)
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}, ensure_ascii=False))
    (folder / "tokenizer_config.json").write_text(json.dumps({"source_lang": "de", "target_lang": "en"}))
    return folder


def ctranslate2_folder(folder: Path):
    """``(ctranslate2 module, converted folder)``, or ``(None, why)`` when CTranslate2 does not import."""
    try:
        import ctranslate2
        from ctranslate2.converters import TransformersConverter
    except ImportError as exc:
        return None, f"CTranslate2 not importable ({exc}); pip install 'attnviz[peers]' to compare with it"
    out = folder.with_name(folder.name + "-ct2")
    if not (out / "model.bin").exists():
        TransformersConverter(str(folder)).convert(str(out), force=True)
    return ctranslate2, out


def interleaved(runs: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Milliseconds of each run in every round, measured round-robin after one warm-up each."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) * 1000)
    return times


def paired(times: dict[str, list[float]], ours: str, theirs: str) -> float:
    """The median of the per-round ratios ``ours`` / ``theirs`` (below 1: ``ours`` is faster)."""
    return round(statistics.median(a / b for a, b in zip(times[ours], times[theirs], strict=True)), 2)


def _hf(folder: Path):
    from transformers import MarianMTModel, MarianTokenizer

    return MarianMTModel.from_pretrained(folder, attn_implementation="eager").eval(), MarianTokenizer.from_pretrained(
        folder)


def shortlist_of(translator, size: int) -> Shortlist:
    """A vocabulary shortlist of the target's first ``size`` pieces, always candidates (a speed figure: on random
    weights the restricted search's words are not the full one's)."""
    with tempfile.NamedTemporaryFile("w", suffix=".vmap", encoding="utf-8", delete=False) as f:
        f.write("\t" + " ".join(translator.tgt_vocab.token(i) for i in range(4, min(size, len(translator.tgt_vocab)))))
    return Shortlist.of(Vmap.read(f.name), translator.tgt_vocab)


def decoding_runs(folder: Path, tokens: int, texts: list[str], ct2, batch: int,
                  shortlist: int = 4000) -> dict[str, Callable[[], object]]:
    """Every tool's greedy, beam and batch run on the same weights, keyed ``what/tool``; ``shortlist``: the size of
    the opt-in vocabulary shortlist attnviz's plain runs are also timed with."""
    translator = load_translator(str(folder))
    short = shortlist_of(translator, shortlist)
    int8 = copy.deepcopy(translator)
    quantize_int8(int8.model)
    model, tok = _hf(folder)
    one = tok([SENTENCE], return_tensors="pt")
    greedy, beam = DecodeConfig(max_len=tokens), DecodeConfig(max_len=tokens, beam=5)
    hf_args = dict(max_new_tokens=tokens, min_new_tokens=tokens, output_attentions=True, return_dict_in_generate=True)

    def hf_batch():
        with torch.inference_mode():
            for start in range(0, len(texts), batch):
                model.generate(**tok(texts[start:start + batch], return_tensors="pt", padding=True), num_beams=1,
                               max_new_tokens=tokens, min_new_tokens=tokens)

    plain, why = open_plain(folder)  # what `attnviz translate -m FOLDER` runs: numpy, no torch (engine.plain)
    if plain is None:
        raise SystemExit(f"the plain runtime declined {folder}: {why}")
    runs = {"greedy/attnviz": lambda: translator.translate(SENTENCE, greedy),
            "greedy_plain/numpy": lambda: plain.translate_batch([SENTENCE], greedy),
            "beam5_plain/numpy": lambda: plain.translate_batch([SENTENCE], beam),
            "batch/numpy": lambda: plain.translate_batch(texts, greedy, batch),
            "greedy/transformers": lambda: _generate(model, one, hf_args, 1),
            "greedy_plain/attnviz": lambda: translator.translate_batch([SENTENCE], greedy),
            "beam5/attnviz": lambda: beam_tree(translator, SENTENCE, beam),
            "beam5/transformers": lambda: _generate(model, one, hf_args, 5),
            "beam5_plain/attnviz": lambda: translator.translate_batch([SENTENCE], beam),
            "batch/attnviz": lambda: translator.translate_batch(texts, greedy, batch),
            "batch/transformers": hf_batch,
            "batch_int8/attnviz": lambda: int8.translate_batch(texts, greedy, batch),
            "greedy_shortlist/attnviz": lambda: translator.translate_batch([SENTENCE], greedy, 1, short),
            "beam5_shortlist/attnviz": lambda: translator.translate_batch([SENTENCE], beam, 1, short),
            "batch_shortlist/attnviz": lambda: translator.translate_batch(texts, greedy, batch, short)}
    if ct2 is not None:
        module, path = ct2
        pieces = [tok.convert_ids_to_tokens(tok(t).input_ids) for t in texts]
        floats = module.Translator(str(path), intra_threads=1, inter_threads=1)
        ints = module.Translator(str(path), intra_threads=1, inter_threads=1, compute_type="int8")
        options = dict(max_decoding_length=tokens, min_decoding_length=tokens)
        runs |= {"beam5/ctranslate2": lambda: floats.translate_batch(pieces[:1], beam_size=5, return_attention=True,
                                                                     **options),
                 "greedy_plain/ctranslate2": lambda: floats.translate_batch(pieces[:1], beam_size=1, **options),
                 "beam5_plain/ctranslate2": lambda: floats.translate_batch(pieces[:1], beam_size=5, **options),
                 "batch/ctranslate2": lambda: floats.translate_batch(pieces, max_batch_size=batch, beam_size=1,
                                                                     **options),
                 "batch_int8/ctranslate2": lambda: ints.translate_batch(pieces, max_batch_size=batch, beam_size=1,
                                                                        **options)}
    return runs


def _generate(model, inputs, args: dict, beams: int):
    with torch.inference_mode():
        return model.generate(**inputs, num_beams=beams, do_sample=False, **args)


CT2_OPEN = """import atexit, sys, ctranslate2, sentencepiece
def _peak():  # VmHWM: this program's own peak (a child's ru_maxrss starts from its parent's size at the fork)
    with open("/proc/self/status") as status:
        sys.stderr.write("".join("PEAK_KIB " + line.split()[1] + chr(10) for line in status if line[:6] == "VmHWM:"))
atexit.register(_peak)
sp = sentencepiece.SentencePieceProcessor(model_file=sys.argv[1] + "/source.spm")
translator = ctranslate2.Translator(sys.argv[3], intra_threads=1)
result = translator.translate_batch([sp.encode(sys.argv[2], out_type=str) + ["</s>"]],
                                   max_decoding_length=int(sys.argv[4]), min_decoding_length=int(sys.argv[4]))
print(" ".join(result[0].hypotheses[0]))
"""


def ct2_open(folder: Path, ct2_path: Path, tokens: int) -> tuple[float, float]:
    """Wall seconds and peak resident MiB of one cold CTranslate2 process (one thread, ``tokens`` tokens)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CT2_OPEN, str(folder), SENTENCE, str(ct2_path), str(tokens)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True, check=False)
    wall = time.perf_counter() - start
    peaks = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("PEAK_KIB ")]
    if done.returncode or not peaks:
        raise RuntimeError(f"CTranslate2 failed: {done.stderr[-500:]}")
    return wall, int(peaks[-1]) / 1024


def opening_figures(folder: Path, ct2, repeats: int, baseline: Path | None, tokens: int = 20) -> dict:
    """Opening, measured as ``bench_loading`` measures it (``loading_probe``, each a fresh interpreter, one thread,
    interleaved): open + first token for attnviz, ``transformers`` and the ``baseline`` checkout (the loading
    before issue 29), peak memory as each process's own VmHWM; a cold ``attnviz translate -m FOLDER`` (20 tokens)
    against the same with ``transformers``, wall time, and its own peak (VmHWM) against CTranslate2's cold run's."""
    sides: dict[str, tuple[str, Path | None]] = {"attnviz": ("attnviz", None), "transformers": ("transformers", None)}
    if baseline is not None:
        sides["baseline"] = ("attnviz", baseline.resolve())
    opened: dict[str, list[dict]] = {side: [] for side in sides}
    cold: dict[str, list[float]] = {"attnviz": [], "transformers": []}
    cold_peak: list[float] = []  # attnviz translate's own peak (VmHWM)
    ct2_runs: list[tuple[float, float]] = []
    for _ in range(repeats):
        for side, (which, root) in sides.items():
            opened[side].append(open_probe(which, folder, root))
            if side in cold:
                run = cold_translate(which, folder, root)
                cold[side].append(run["wall_s"])
                if side == "attnviz":
                    cold_peak.append(run["peak_mib"])
        if ct2 is not None:
            ct2_runs.append(ct2_open(folder, ct2[1], tokens))
    out: dict[str, object] = {f"open_{side}": {key: round(statistics.median(r[key] for r in runs), 3)
                                               for key in ("open_s", "first_token_s", "peak_mib")}
                              for side, runs in opened.items()}
    out["cold_translate_s"] = {side: round(statistics.median(walls), 2) for side, walls in cold.items()}
    out["cold_translate_peak_mib"] = {"attnviz": round(statistics.median(cold_peak))}
    if ct2_runs:
        out["open_ctranslate2"] = {"cold_translate_s": round(statistics.median(w for w, _ in ct2_runs), 2),
                                   "peak_mib": round(statistics.median(p for _, p in ct2_runs))}
    peak = [r["peak_mib"] for r in opened["attnviz"]]
    ratios = {"open_peak_vs_transformers": _ratio(peak, [r["peak_mib"] for r in opened["transformers"]]),
              "cold_translate_vs_transformers": _ratio(cold["attnviz"], cold["transformers"])}
    if ct2_runs:  # paired: each round's attnviz process against the CTranslate2 one after it
        ratios["cold_translate_vs_ctranslate2"] = round(statistics.median(
            a / w for a, (w, _) in zip(cold["attnviz"], ct2_runs, strict=True)), 2)
        ratios["cold_peak_vs_ctranslate2"] = round(statistics.median(
            a / p for a, (_, p) in zip(cold_peak, ct2_runs, strict=True)), 2)
        ratios["peak_vs_ctranslate2"] = round(statistics.median(
            r["peak_mib"] / p for r, (_, p) in zip(opened["attnviz"], ct2_runs, strict=True)), 2)
    if baseline is not None:
        ratios["open_time_vs_baseline"] = _ratio([r["open_s"] for r in opened["attnviz"]],
                                                 [r["open_s"] for r in opened["baseline"]])
    out["opening_ratios"] = ratios
    out["opening_load_average"] = [round(x, 2) for x in os.getloadavg()]
    return out


def _ratio(ours: list[float], theirs: list[float]) -> float:
    return round(statistics.median(ours) / statistics.median(theirs), 2)


PAIRS = {"greedy_vs_transformers": ("greedy/attnviz", "greedy/transformers"),
         "beam5_vs_transformers": ("beam5/attnviz", "beam5/transformers"),
         "batch_vs_transformers": ("batch/attnviz", "batch/transformers"),
         "beam5_plain_vs_captured": ("beam5_plain/attnviz", "beam5/attnviz"),
         "greedy_plain_vs_captured": ("greedy_plain/attnviz", "greedy/attnviz"),
         "beam5_vs_ctranslate2": ("beam5/attnviz", "beam5/ctranslate2"),
         "greedy_plain_vs_ctranslate2": ("greedy_plain/attnviz", "greedy_plain/ctranslate2"),
         "beam5_plain_vs_ctranslate2": ("beam5_plain/attnviz", "beam5_plain/ctranslate2"),
         "batch_vs_ctranslate2": ("batch/attnviz", "batch/ctranslate2"),
         "batch_int8_vs_ctranslate2": ("batch_int8/attnviz", "batch_int8/ctranslate2"),
         "greedy_shortlist_vs_plain": ("greedy_shortlist/attnviz", "greedy_plain/attnviz"),
         "beam5_shortlist_vs_plain": ("beam5_shortlist/attnviz", "beam5_plain/attnviz"),
         "batch_shortlist_vs_plain": ("batch_shortlist/attnviz", "batch/attnviz"),
         "greedy_shortlist_vs_ctranslate2": ("greedy_shortlist/attnviz", "greedy_plain/ctranslate2"),
         "beam5_shortlist_vs_ctranslate2": ("beam5_shortlist/attnviz", "beam5_plain/ctranslate2"),
         "batch_shortlist_vs_ctranslate2": ("batch_shortlist/attnviz", "batch/ctranslate2"),
         "greedy_numpy_vs_ctranslate2": ("greedy_plain/numpy", "greedy_plain/ctranslate2"),
         "beam5_numpy_vs_ctranslate2": ("beam5_plain/numpy", "beam5_plain/ctranslate2"),
         "batch_numpy_vs_ctranslate2": ("batch/numpy", "batch/ctranslate2"),
         "greedy_numpy_vs_torch": ("greedy_plain/numpy", "greedy_plain/attnviz"),
         "beam5_numpy_vs_torch": ("beam5_plain/numpy", "beam5_plain/attnviz"),
         "batch_numpy_vs_torch": ("batch/numpy", "batch/attnviz")}
TARGETS = {"greedy_plain_vs_ctranslate2": 1.15, "beam5_plain_vs_ctranslate2": 1.15, "batch_vs_ctranslate2": 1.3,
           "batch_int8_vs_ctranslate2": 1.3, "cold_translate_vs_ctranslate2": 2.0, "peak_vs_ctranslate2": 1.5,
           "cold_peak_vs_ctranslate2": 1.5,
           "beam5_plain_vs_captured": 1.0, "step_vs_floor": 1.8, "open_peak_vs_transformers": 1.1,
           "open_time_vs_baseline": 0.5, "cold_translate_vs_transformers": 0.6, "greedy_numpy_vs_ctranslate2": 1.15,
           "beam5_numpy_vs_ctranslate2": 1.15, "batch_numpy_vs_ctranslate2": 1.3}


def ratios(times: dict[str, list[float]]) -> dict[str, float]:
    """Every paired ratio whose two sides were measured (below 1: the first is faster)."""
    return {name: paired(times, ours, theirs) for name, (ours, theirs) in PAIRS.items()
            if ours in times and theirs in times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=Path("/tmp/attnviz-bench-peers/marian"))
    parser.add_argument("--size", choices=sorted(SIZES), default="marian")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--batch", type=int, default=BATCH, help="sentences a batch (default: the CLI's, 32)")
    parser.add_argument("--open-repeats", type=int, default=3, help="cold processes per tool (each opens the folder)")
    parser.add_argument("--baseline", type=Path, help="an attnviz checkout from before issue 29 (opening time)")
    parser.add_argument("--no-floor", action="store_true", help="skip the bundled model's step-vs-floor figure")
    parser.add_argument("--shortlist", type=int, default=4000, help="target pieces in the shortlist timed")
    parser.add_argument("--bundled", default=str(Path(__file__).resolve().parents[1] / "models" /
                                                 "de-en-multi30k.safetensors"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    threadpool_limits(1, user_api="blas")  # numpy's products (the plain runtime), one thread as every tool
    folder = build_folder(args.folder, args.size)
    ct2_module, ct2_path = ctranslate2_folder(folder)
    ct2 = (ct2_module, ct2_path) if ct2_module is not None else None
    # first: this process is still small
    opening = opening_figures(folder, ct2, args.open_repeats, args.baseline, args.tokens)
    runs = decoding_runs(folder, args.tokens, corpus(args.sentences), ct2, args.batch, args.shortlist)
    times = interleaved(runs, args.repeats)
    decoding_load = [round(x, 2) for x in os.getloadavg()]
    floor = {} if args.no_floor else {"step_vs_floor": floor_figures(args.bundled, args.repeats)}
    print(json.dumps({
        "folder": str(folder), "size": SIZES[args.size], "threads": 1, "tokens": args.tokens,
        "batch_sentences": args.sentences, "batch": args.batch, "shortlist": args.shortlist, "repeats": args.repeats,
        "torch": torch.__version__,
        "ctranslate2": ct2_path if ct2 is None else getattr(ct2_module, "__version__", "?"),
        "ms_median": {name: round(statistics.median(t), 1) for name, t in times.items()},
        "ratios": ratios(times), "decoding_load_average": decoding_load,
        **opening, **floor, "targets": TARGETS,
    }, indent=2, default=str))


if __name__ == "__main__":
    main()
