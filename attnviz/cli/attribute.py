"""``attnviz attribute``: what each output token of one translation depended on (a registered attribution method),
or what each decoder layer would have predicted (``--method logit-lens``).

The sentence comes as an argument or on standard input; the output is the model's greedy translation, or the one
given with ``--target`` (teacher-forced, as ``align`` forces its targets). Text goes to stdout: per output token its
attributed quantity, the share from the source and the largest source and prefix contributors; ``--json`` prints
everything as one object, ``--out FILE.npz`` writes the arrays with a JSON sidecar (``engine.attribution.export``).
Progress goes to stderr (``cli.progress``). The methods are the engine's registry: nothing here names one but the
logit lens, which is not a source/prefix map.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.cli import lens_corpus
from attnviz.cli.args import (
    MAX_LENGTH,
    add_dtype,
    add_languages,
    add_limit,
    add_model,
    add_prompt,
    int_range,
    output_file,
)
from attnviz.cli.jsonout import json_text
from attnviz.cli.progress import run_analysis
from attnviz.cli.speed import add_threads, torch_threads
from attnviz.engine.attribution.base import AGGREGATIONS, BASELINES, MAX_STEPS
from attnviz.engine.errors import InputError, quoted
from attnviz.engine.text.tokenize import visible_token

if TYPE_CHECKING:
    from attnviz.engine.attribution.base import Attribution
    from attnviz.engine.attribution.logit_lens import LogitLens

LENS = "logit-lens"


def add_command(sub) -> None:
    p = sub.add_parser("attribute", help="what each output token depended on (gradients, ALTI+, patching...) or the "
                       "logit lens",
                       description="Translate SENTENCE greedily (or force --target) and attribute every output token "
                                   "to the source tokens and the target prefix with --method, or show what every "
                                   "decoder layer would predict (--method logit-lens). --method list prints the "
                                   "methods defined for the model, and why the others are not.")
    add_model(p)
    add_dtype(p)
    add_threads(p)
    p.add_argument("sentence", nargs="?", metavar="SENTENCE", help="the sentence (default: standard input, one line); "
                   "a language model's prefix")
    p.add_argument("--method", required=True, help="an attribution method (e.g. gradient-x-input, "
                   "integrated-gradients, saliency), logit-lens, or list to print those the model allows")
    p.add_argument("--target", metavar="TRANSLATION", help="the translation to attribute, tokenised by the model "
                   "(default: the model's greedy translation)")
    p.add_argument("--foil", metavar="TOKEN", help="contrastive: attribute log p(chosen) - log p(TOKEN), one output "
                   "token (gradient methods)")
    p.add_argument("--steps", type=int_range(1, MAX_STEPS), help="integrated gradients: points of the path (32)")
    p.add_argument("--baseline", choices=BASELINES, help="integrated gradients: the reference input (zero)")
    p.add_argument("--aggregate", choices=AGGREGATIONS, help="over the embedding: l2 norm or signed sum (default: "
                   "the method's, l2 for saliency, sum otherwise)")
    p.add_argument("--corrupt", metavar="TEXT", help="activation patching: the corrupted source, a sentence of as "
                   "many tokens or WHICH=WORD (a source token's 1-based position, <sos> included, or the token "
                   "itself, replaced by WORD); default every source token <unk>")
    p.add_argument("--probability", action="store_true", help="attribute p(chosen) instead of log p(chosen)")
    p.add_argument("--top", type=int_range(1, 100), default=3, help="contributors (or lens tokens) shown (3)")
    p.add_argument("--json", action="store_true", help="print everything as one JSON object")
    p.add_argument("--out", metavar="FILE.npz", type=output_file, help="write the arrays and a JSON sidecar (with "
                   "--corpus: the table as FILE.json or FILE.csv)")
    p.add_argument("--corpus", metavar="FILE", help="logit lens over a corpus, one sentence per line: per decoder "
                   "layer, the share of output steps whose top token is English, German, French, other, unknown")
    add_limit(p)
    p.add_argument("--plot", metavar="FILE.png", type=output_file, help="with --corpus: the shares as stacked bars "
                   "(.png, .svg or .pdf)")
    p.add_argument("--max-len", type=MAX_LENGTH, help="with --corpus: most output tokens per sentence (50)")
    add_languages(p)
    add_prompt(p)
    p.set_defaults(func=cmd_attribute)


def _sentence(args: argparse.Namespace) -> str:
    if args.sentence is not None:
        return args.sentence
    lines = [line for line in sys.stdin.read().splitlines() if line.strip()]
    if len(lines) != 1:
        raise InputError(f"attribute reads one sentence; standard input has {len(lines)} non-empty lines. Give "
                         "the sentence as an argument or one line on standard input.")
    return lines[0]


def _forced(translator, sentence: str, target: str | None) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(source tokens, output tokens, the prompt's roles): the greedy translation's, or ``target``'s tokens then
    ``<eos>`` (the source as decoding reads it: an LLM's prompt without its last token, its first decoder input)."""
    if target is None:
        translation = translator.translate(sentence)
        for warning in translation.warnings:
            print(f"attnviz: warning: {warning}", file=sys.stderr)
        return translation.src_tokens, translation.tokens, tuple(translation.roles)
    if not translator.has_source:
        raise InputError("--target is for translation models; a language model attributes its text (SENTENCE) and "
                         "what it generates after it")
    found = translator.prepare(sentence)
    for warning in found.warnings:
        print(f"attnviz: warning: {warning}", file=sys.stderr)
    ids = translator.target_ids(target)
    if not ids:
        raise InputError("--target is empty: give the translation to attribute")
    return (tuple(found.src_tokens), (*translator.tgt_vocab.decode(ids, strip_specials=False), "<eos>"),
            tuple(found.roles))


def _settings(args: argparse.Namespace):
    from attnviz.engine.attribution.base import AttributionSettings

    given: dict[str, Any] = {"aggregate": args.aggregate, "foil": args.foil, "steps": args.steps,
                             "baseline": args.baseline, "target": "probability" if args.probability else None,
                             "corrupt": args.corrupt}
    return AttributionSettings(**{k: v for k, v in given.items() if v is not None})


def _print_methods(translator) -> None:
    """The methods defined for the model's kind, then those that are not, each with why."""
    from attnviz.engine.attribution.base import methods_for
    from attnviz.engine.attribution.logit_lens import lens_not_defined

    found = methods_for(translator)
    for method in found.defined:
        print(f"{method.name:<22} {method.label}: {method.description}")
    lens_why = lens_not_defined(translator)
    if lens_why is None:
        print(f"{LENS:<22} Logit lens: what each decoder layer would predict through the output projection.")
    for method, why in found.undefined:
        print(f"{method.name:<22} not for this model: {why}")
    if lens_why is not None:
        print(f"{LENS:<22} not for this model: {lens_why}")


def _check_method(name: str) -> None:
    from attnviz.engine.attribution.base import method_names

    if name != LENS and name not in method_names():
        raise InputError(f"--method: unknown method {quoted(name)}; choose one of {', '.join((*method_names(), LENS))}")


def cmd_attribute(args: argparse.Namespace) -> int:
    torch_threads(args)  # --threads, before the model is read
    from attnviz.engine.attribution.base import attribution_steps
    from attnviz.engine.attribution.export import save_attribution, sidecar
    from attnviz.engine.attribution.logit_lens import logit_lens_steps
    from attnviz.engine.loading import load_translator

    if args.method == "list":
        _print_methods(load_translator(args.model, args.dtype))
        return 0
    _check_method(args.method)
    if args.method == LENS and (args.foil or args.steps or args.baseline or args.aggregate or args.probability
                                or args.corrupt):
        raise InputError("the logit lens takes none of --foil, --steps, --baseline, --aggregate, --probability, "
                         "--corrupt")
    if lens_corpus.wanted(args, LENS):
        return lens_corpus.cmd_corpus(args)
    settings = None if args.method == LENS else _settings(args)  # refused before the model is read
    sentence = _sentence(args)
    translator = lens_corpus.load(args)
    translator.refuse_beyond_positions(sentence, "an attribution" if args.method != LENS else "a logit lens")
    src_tokens, tokens, roles = _forced(translator, sentence, args.target)
    result: Attribution | LogitLens
    if args.method == LENS:
        result = run_analysis(logit_lens_steps(translator, src_tokens, tokens, top_k=args.top))
    else:
        result = run_analysis(attribution_steps(translator, args.method, src_tokens, tokens, settings, roles=roles))
    info = translator.info
    if args.out:
        save_attribution(args.out, result, info, sentence)
    if args.json:
        print(json_text(sidecar(result, info, sentence) | _json_arrays(result), ensure_ascii=False))
    elif args.method == LENS:
        _print_lens(result, args.top)
    else:
        _print_attribution(result, args.top)
    return 0


def _json_arrays(result) -> dict[str, Any]:
    """The result's arrays as JSON lists (floats rounded to 6 digits); labels are already in the metadata."""
    out = {}
    for name, array in result.arrays().items():
        if array.dtype.kind in "fc":
            out[name] = np.round(array.astype(np.float64), 6).tolist()
        elif array.dtype.kind in "iu":
            out[name] = array.tolist()
        elif name.startswith("top_"):
            out[name] = array.tolist()
    return out


def _top(values: np.ndarray, labels, n: int) -> str:
    """The ``n`` entries largest in magnitude, as ``label +value``."""
    order = np.argsort(-np.abs(values), kind="stable")[:n]
    return "  ".join(f"{visible_token(labels[i])} {values[i]:+.4f}" for i in order) or "-"


def _print_attribution(result, top: int) -> None:
    settings = result.settings
    said = ", ".join(f"{k} {v}" for k, v in settings.items() if k not in ("quantity", "gradient_at") and v is not None)
    print(f"method: {result.method} ({said})")
    if "quantity" in settings:
        print(f"attributed: f = {settings['quantity']}" + (f", at the {settings['gradient_at']}"
                                                         if "gradient_at" in settings else ""))
    if result.layered:
        print(f"layers: {result.layers}; shown: after the last layer")
    print("source: " + " ".join(map(visible_token, result.src_tokens)))
    prompt = bool(result.src_roles)
    if prompt:
        first, last = result.span
        print(f"the sentence (source span): columns {first + 1} to {last} of the prompt")
    print("per output token: f, the shares of |attribution| from the " +
          ("source span, the instruction and template, the output prefix" if prompt else "source") +
          ", the largest contributors")
    for note in result.notes:
        print(f"note: {note}")
    shares, scores = result.shares()[-1], result.scores
    for t, token in enumerate(result.tokens):
        score = "" if scores is None else f" f {scores[t]:+.4f}"
        share = (f"span {shares[t, 0]:.2f} instr {shares[t, 1]:.2f} prefix {shares[t, 2]:.2f}" if prompt
                 else f"share {shares[t, 0]:.2f}")
        src = f" | source: {_top(result.source[-1, t], result.src_tokens, top)}" if result.src_tokens else ""
        prefix = _top(result.prefix[-1, t, : t + 1], result.decoder_inputs, top)
        print(f"{t + 1:>3} {visible_token(token)}{score} {share}{src} | prefix: {prefix}")


def _print_lens(lens, top: int) -> None:
    print(f"logit lens: each decoder layer's output through {lens.readout}")
    decided = lens.decided_at()
    for t, token in enumerate(lens.tokens):
        where = f"decided at layer {decided[t]}" if decided[t] else "not the last layer's top token"
        print(f"{t + 1:>3} {token} ({where})")
        for layer in range(lens.layers):
            tops = ", ".join(f"{w} {p:.3f}" for w, p in zip(lens.top_tokens[layer, t, :top],
                                                            lens.top_probs[layer, t, :top]))
            print(f"    layer {layer + 1}: p {lens.chosen_prob[layer, t]:.4f} rank {lens.chosen_rank[layer, t]:>5}"
                  f"  top: {tops}")
