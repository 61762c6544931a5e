"""Command-line sub-commands that decode with one model: ``translate`` (sentences or standard input, line by line;
see ``cli.batch``) and ``generate`` (a language model continuing a prefix).

``translate`` without ``-m`` uses the default bundled model (``attnviz.paths``), saying so on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from attnviz.cli.args import (
    MAX_BEAM,
    add_attention_export,
    add_decoding,
    add_device,
    add_dtype,
    add_head_flags,
    add_int8,
    add_languages,
    add_model,
    add_prompt,
    apply_int8,
    decoding,
    float_range,
    head_settings,
    int_range,
)
from attnviz.cli.jsonout import json_text
from attnviz.cli.speed import add_speed, apply_threads, batch_size, plain_translator, shortlist, torch_threads
from attnviz.engine.errors import InputError
from attnviz.paths import default_model_path

if TYPE_CHECKING:
    from attnviz.cli.batch import Line
    from attnviz.engine.config import DecodeConfig
    from attnviz.engine.translator import Translator


def add_commands(sub) -> None:
    p = sub.add_parser("translate", help="translate sentences with a checkpoint or a model folder (MarianMT, NLLB, "
                                         "Llama/Qwen/Gemma LLMs)",
                       description="Translate the SENTENCEs, or one sentence per line of standard input. Every input "
                                   "line gives one output line; a line that cannot be translated gives an empty line "
                                   "(or {\"line\": N, \"error\": ...} with --json) and a warning on stderr.",
                       epilog="exit status: 0 all lines translated, 1 some line failed or the model could not be "
                              "read, 2 bad options or no input")
    p.add_argument("-m", "--model", help="checkpoint file (.safetensors) or imported model folder; default: the "
                   "bundled model (de-en-multi30k)")
    p.add_argument("sentences", nargs="*", metavar="SENTENCE")
    p.add_argument("--json", action="store_true", help="print one JSON object per sentence")
    add_attention_export(p)
    p.add_argument("--merge-subwords", action="store_true",
                   help="with --attention: merge subword pieces into words (sum over a word's key pieces, mean over "
                        "its query pieces; rows still sum to 1)")
    add_decoding(p)
    add_languages(p)
    add_prompt(p)
    add_int8(p)
    add_speed(p)
    p.add_argument("--n-best", type=int_range(1, MAX_BEAM), metavar="K",
                   help="print the K best hypotheses of the beam (K <= --beam) with their length-normalised score "
                        "and summed log-probability: LINE, RANK, SCORE, LOGPROB, TEXT tab-separated, or an n_best "
                        "list in each --json object")
    add_head_flags(p)
    add_dtype(p)
    add_device(p)
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("generate", help="continue a prefix with a language model (e.g. names-char)",
                       description="Generate N sequences that continue PREFIX (empty by default), greedily "
                                   "(--temperature 0) or by sampling from the softmax at the given temperature.")
    add_model(p, help="language-model checkpoint (.safetensors)")
    add_dtype(p)
    add_device(p)
    p.add_argument("--prefix", default="", help="the start of every sequence (default: empty)")
    p.add_argument("--n", type=int_range(1, 100_000), default=10, help="how many sequences (default 10)")
    p.add_argument("--temperature", type=float_range(0.0, 1000.0),
                   help="0 = greedy, > 0 samples the softmax at that temperature "
                   "(default: the one the model's recipe names, e.g. 1.0 for names-char; 1.0 when it names none)")
    p.add_argument("--top-k", type=int_range(0, 10**9), metavar="K",
                   help="sample only among the K most probable tokens (0 = all; default: the recipe's, else 0)")
    p.add_argument("--top-p", type=float_range(1e-6, 1.0), metavar="P",
                   help="sample only among the fewest most probable tokens holding probability P (nucleus; 1 = all; "
                        "default: the recipe's, else 1)")
    p.add_argument("--seed", type=int_range(0, 2**63 - 1),
                   help="seed of the sampling, to reproduce an output (default: the recipe's, "
                   "else 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object per sequence")
    add_attention_export(p)
    p.set_defaults(func=cmd_generate)


def _default_model() -> str:
    """The bundled model the app opens first, for ``translate`` without ``-m``."""
    path = default_model_path()
    if path is None:
        raise InputError("no model given and no bundled model found: pass one with -m MODEL.safetensors")
    print(f"attnviz: using the default model {path} (choose another with -m)", file=sys.stderr)
    return path


def _refuse_model_as_sentence(args: argparse.Namespace) -> None:
    """A model given without -m would be translated as a sentence (its path read as words): say so instead."""
    if args.model or not args.sentences:
        return
    first = Path(args.sentences[0])
    if first.suffix == ".safetensors" or (first.is_dir() and (first / "config.json").exists()):
        raise InputError(f"{first} looks like a model, not a sentence: give it with -m, e.g. "
                         f"attnviz translate -m {first} \"SENTENCE\"")


def cmd_translate(args: argparse.Namespace) -> int:
    from attnviz.cli.batch import read_lines, translate_lines
    from attnviz.engine.loading import load_translator

    if args.n_best and args.n_best > (args.beam or 1) and args.decoding == "attnviz":
        raise InputError(f"--n-best {args.n_best} asks for more hypotheses than the beam keeps; use --beam "
                         f"{args.n_best} or more, or a smaller --n-best")
    _refuse_model_as_sentence(args)
    apply_threads(args)
    lines = read_lines(args.sentences)
    args.model = args.model or _default_model()
    # plain translation of a MarianMT folder runs without torch (engine.plain); everything else on the torch path
    plain = plain_translator(args)
    if plain is not None:
        decode = decoding(args, plain)
        translate_lines(plain, lines, decode, batch=(batch_size(args, plain), None))
        return _written(args, lines)
    torch_threads(args)
    translator = load_translator(args.model, args.dtype, args.device)
    if not translator.has_source:
        raise InputError(f"{args.model} is a language model: it continues text instead of translating it. Use "
                         f"attnviz generate -m {args.model} --prefix TEXT")
    translator.use_languages(args.src_lang, args.tgt_lang)
    translator.use_prompt(None if args.prompt is None else args.prompt.replace("\\n", "\n"))  # \n: a new line
    decode = decoding(args, translator, **head_settings(args, translator))
    if args.n_best and args.n_best > decode.beam:
        raise InputError(f"--n-best {args.n_best} asks for more hypotheses than the beam keeps; use --beam "
                         f"{args.n_best} or more, or a smaller --n-best")
    apply_int8(args, translator)
    # --attention and --n-best search each sentence as events (the same choice as the batched search), keeping the
    # chosen hypothesis' own attention and every finished hypothesis' score
    translate_lines(translator, lines, decode, capture=bool(args.attention), n_best=args.n_best or 0,
                    batch=(batch_size(args, translator), shortlist(args, translator)))
    if args.attention:
        _save_attention(args, translator, lines)
    return _written(args, lines)


def _written(args: argparse.Namespace, lines: list[Line]) -> int:
    """Print the translated ``lines``; the exit status (1 when a line failed)."""
    from attnviz.cli.batch import utf8_stdout, write_lines

    utf8_stdout()
    failed = write_lines(lines, args.json, args.n_best or 0)
    if failed:
        print(f"attnviz: {failed} of {len(lines)} line(s) could not be translated (their output lines are empty)",
              file=sys.stderr)
    return 1 if failed else 0


def _save_attention(args: argparse.Namespace, translator: Translator, lines: list[Line]) -> None:
    """``--attention``: every translated line's attention maps, merged into words with ``--merge-subwords``."""
    from attnviz.engine.export import save_attention
    from attnviz.engine.subwords import merge_translation

    done = [(line.text, line.translation) for line in lines if line.translation is not None]
    translations = [translation for _, translation in done]
    found = ([merge_translation(t, translator.src_spec, translator.tgt_spec) for t in translations]
             if args.merge_subwords else translations)
    save_attention(args.attention, found, translator.info, [text for text, _ in done])
    print(f"attention of {len(found)} sentence(s) saved to {args.attention}", file=sys.stderr)


def _recipe_decoding(translator: Translator) -> DecodeConfig:
    """The decoding settings of the recipe a model was trained with (stored in its checkpoint); sampling at
    temperature 1.0 with seed 0 when it stores none."""
    from attnviz.engine.config import DecodeConfig

    recipe = translator.card.recipe
    if recipe is not None and isinstance(recipe.get("decode"), dict):
        return DecodeConfig.from_dict(recipe["decode"])
    return DecodeConfig(temperature=1.0)


def cmd_generate(args: argparse.Namespace) -> int:
    from attnviz.engine.config import DecodeConfig
    from attnviz.engine.export import save_attention
    from attnviz.engine.loading import load_translator

    if args.temperature is not None:
        DecodeConfig(temperature=args.temperature)  # validates before the model is read
    if args.n < 1:
        raise InputError(f"--n must be at least 1, not {args.n}")
    translator = load_translator(args.model, args.dtype, args.device)
    if translator.has_source:
        raise InputError(f"{args.model} is a translation model ({translator.card.languages}); it needs a "
                         f"sentence to translate. Use attnviz translate -m {args.model} \"SENTENCE\"")
    trained = _recipe_decoding(translator)
    temperature = trained.temperature if args.temperature is None else args.temperature
    seed = trained.seed if args.seed is None else args.seed
    n = args.n
    if temperature == 0 and n > 1:
        print("note: greedy decoding (temperature 0) gives one sequence; printing it once", file=sys.stderr)
        n = 1
    cuts = {name: value for name, value in (("sample_top_k", args.top_k), ("sample_top_p", args.top_p))
            if value is not None}
    outputs = translator.generate(args.prefix, n, trained.replace(temperature=temperature, seed=seed, **cuts))
    for w in outputs[0].warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.attention:
        save_attention(args.attention, outputs, translator.info)
        print(f"attention of {len(outputs)} sequence(s) saved to {args.attention}", file=sys.stderr)
    for t in outputs:
        if args.json:
            print(json_text({"prefix": args.prefix, "tokens": list(t.words), "text": t.text,
                              "probabilities": [round(p, 6) for p in t.probabilities],
                              "ended": bool(t.tokens) and t.tokens[-1] == "<eos>"}, ensure_ascii=False))
        else:
            print(t.text)
    return 0
