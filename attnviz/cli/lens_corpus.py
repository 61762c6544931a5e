"""``attnviz attribute --method logit-lens --corpus FILE``: the logit lens over a corpus, by language (the pivot
question: does a German->French model's middle layer predict English words?).

Per decoder layer, the share of output steps whose top token is English, German, French, of another script or not
judged (``engine.attribution.lens_languages``; the language of a token is a heuristic guess, said under the table).
The table goes to stdout (or one JSON object with ``--json``); ``--out`` writes it as JSON or CSV (by the suffix),
``--plot`` as stacked bars (PNG, SVG or PDF). Progress goes to stderr; Ctrl+C stops after the sentence being read
and still prints (and writes) the shares of the sentences read, with exit status 130.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from attnviz.cli.jsonout import json_text
from attnviz.cli.progress import run_analysis
from attnviz.engine.errors import InputError

CORPUS_ONLY = ("--limit", "--plot", "--max-len")
TABLES = (".json", ".csv")
PICTURES = (".png", ".svg", ".pdf")


def wanted(args: argparse.Namespace, lens: str) -> bool:
    """Whether the command reads a corpus; flags that belong to the other mode are refused, each by name."""
    given = [flag for flag, value in zip(CORPUS_ONLY, (args.limit, args.plot, args.max_len)) if value]
    if args.corpus is None:
        if given:
            raise InputError(f"{given[0]} is for the logit lens over a corpus: add --corpus FILE")
        return False
    if args.method != lens:
        raise InputError(f"--corpus reads the logit lens over a corpus; use it with --method {lens}")
    other = [flag for flag, value in (("SENTENCE", args.sentence), ("--target", args.target)) if value is not None]
    if other:
        raise InputError(f"--corpus reads its sentences from the file; give no {other[0]}")
    for flag, path, suffixes in (("--out", args.out, TABLES), ("--plot", args.plot, PICTURES)):
        if path and Path(path).suffix.lower() not in suffixes:
            raise InputError(f"{flag} {path}: with --corpus it writes {' or '.join(suffixes)}; name the file so")
    return True


def load(args: argparse.Namespace):
    """The model, with the languages and the LLM instruction the flags choose."""
    from attnviz.engine.loading import load_translator

    translator = load_translator(args.model, args.dtype)
    translator.use_languages(args.src_lang, args.tgt_lang)
    translator.use_prompt(None if args.prompt is None else args.prompt.replace("\\n", "\n"))  # \n: a new line
    return translator


def cmd_corpus(args: argparse.Namespace) -> int:
    from attnviz.engine.attribution.lens_languages import LensLanguages, lens_language_steps
    from attnviz.engine.config import DecodeConfig
    from attnviz.engine.corpus.reader import read_lines
    from attnviz.engine.export import model_name

    sentences = [line for line in read_lines(args.corpus) if line.strip()]
    if args.limit:
        sentences = sentences[:args.limit]
    translator = load(args)
    settings = {"model": model_name(translator.info), "corpus": Path(args.corpus).name,
                "limit": args.limit or None, "src_lang": translator.src_spec.lang,
                "tgt_lang": translator.tgt_spec.lang, "prompt": getattr(translator, "prompt_template", None),
                "decoding": "greedy", "max_len": args.max_len or DecodeConfig().max_len}
    stop = threading.Event()
    main = threading.current_thread() is threading.main_thread()  # only the main thread may take a signal
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set()) if main else None  # Ctrl+C: stop, keep the read
    try:
        steps = lens_language_steps(translator, sentences, DecodeConfig(max_len=settings["max_len"]), settings, stop)
        result: LensLanguages = run_analysis(steps)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    _write(args, result)
    if args.json:
        print(json_text(result.to_json(), ensure_ascii=False))
    else:
        _print_table(result)
    if result.stopped:
        print(f"attnviz: stopped after {result.sentences} of {len(sentences)} sentences; the shares are theirs",
              file=sys.stderr)
        return 130
    return 0


def _write(args: argparse.Namespace, result) -> None:
    from attnviz.engine.checkpoints.store import atomic_write
    from attnviz.plots.lens_languages import save_language_shares

    if args.out:
        text = result.csv_text() if args.out.lower().endswith(".csv") else json_text(result.to_json(),
                                                                                     ensure_ascii=False) + "\n"
        atomic_write(Path(args.out), text.encode("utf-8"))
    if args.plot:
        title = (f"Logit lens by language: {result.settings.get('model')}, {result.sentences} sentences "
                 f"({result.settings.get('src_lang')} -> {result.settings.get('tgt_lang')})")
        save_language_shares(args.plot, result.shares(), title)


def _print_table(result) -> None:
    from attnviz.engine.text.token_language import HEURISTIC, LANGUAGE_LABELS, LANGUAGES

    said = f"{result.sentences} sentence" + ("" if result.sentences == 1 else "s")
    print(f"logit lens by language: {said}, {result.steps} output steps per layer "
          f"(each layer's output through {result.readout})")
    print("layer " + " ".join(f"{LANGUAGE_LABELS[lang]:>12}" for lang in LANGUAGES))
    for row in result.table():
        print(f"{row['layer']:>5} " + " ".join(f"{row[lang]:>12.3f}" for lang in LANGUAGES))
    for why in result.skipped:
        print(f"left out: {why}")
    print(f"note: {HEURISTIC}")
