"""The ``attnviz`` command line: argparse sub-commands that drive the same engine as the GUI.

Errors a user can cause (``AttnvizError``) are printed as one line on stderr with exit status 1, or 2 for bad
input; they never show a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from attnviz._version import __version__
from attnviz.cli import analysis as cli_analysis
from attnviz.cli.args import BEAM, LENGTH_PENALTY, MAX_BEAM, MAX_LENGTH, float_range, int_range, output_file
from attnviz.cli.convert import add_command as add_convert
from attnviz.cli.evaluate import add_commands as add_eval_commands
from attnviz.cli.evaluate import add_head_flags, head_settings
from attnviz.cli.train import add_commands
from attnviz.engine.errors import AttnvizError, InputError


def _add_translate(sub) -> None:
    p = sub.add_parser("translate", help="translate sentences with a checkpoint",
                       description="Translate the SENTENCEs, or one sentence per line of standard input. Every input "
                                   "line gives one output line; a line that cannot be translated gives an empty line "
                                   "(or {\"line\": N, \"error\": ...} with --json) and a warning on stderr.",
                       epilog="exit status: 0 all lines translated, 1 some line failed or the model could not be "
                              "read, 2 bad options or no input")
    p.add_argument("-m", "--model", help="checkpoint file (.safetensors) or imported model folder; default: the "
                   "default bundled model (de-en-multi30k)")
    p.add_argument("sentences", nargs="*", metavar="SENTENCE")
    p.add_argument("--json", action="store_true", help="print one JSON object per sentence")
    p.add_argument("--attention", metavar="OUT.npz", type=output_file,
                   help="save every attention matrix with token labels")
    p.add_argument("--merge-subwords", action="store_true",
                   help="with --attention: merge subword pieces into words (sum over a word's key pieces, mean over "
                        "its query pieces; rows still sum to 1)")
    p.add_argument("--beam", type=BEAM, default=1, help=f"beam width (1 = greedy, the default; at most {MAX_BEAM})")
    p.add_argument("--length-penalty", type=LENGTH_PENALTY, default=1.0,
                   help="GNMT length penalty alpha for beam search (0 to 10)")
    p.add_argument("--max-len", type=MAX_LENGTH, default=50, help="most output tokens per sentence (default 50)")
    p.add_argument("--n-best", type=int_range(1, MAX_BEAM), metavar="K",
                   help="print the K best hypotheses of the beam (K <= --beam) with their length-normalised score "
                        "and summed log-probability: LINE, RANK, SCORE, LOGPROB, TEXT tab-separated, or an n_best "
                        "list in each --json object")
    add_head_flags(p)
    p.set_defaults(func=cmd_translate)


def _add_generate(sub) -> None:
    p = sub.add_parser("generate", help="continue a prefix with a language model (e.g. names-char)",
                       description="Generate N sequences that continue PREFIX (empty by default), greedily "
                                   "(--temperature 0) or by sampling from the softmax at the given temperature.")
    p.add_argument("-m", "--model", required=True, help="language-model checkpoint (.safetensors)")
    p.add_argument("--prefix", default="", help="the start of every sequence (default: empty)")
    p.add_argument("--n", type=int_range(1, 100_000), default=10, help="how many sequences (default 10)")
    p.add_argument("--temperature", type=float_range(0.0, 1000.0),
                   help="0 = greedy, > 0 samples the softmax at that temperature "
                   "(default: the one the model's recipe names, e.g. 1.0 for names-char; 1.0 when it names none)")
    p.add_argument("--seed", type=int_range(0, 2**63 - 1),
                   help="seed of the sampling, to reproduce an output (default: the recipe's, "
                   "else 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object per sequence")
    p.add_argument("--attention", metavar="OUT.npz", type=output_file,
                   help="save every attention matrix with token labels")
    p.set_defaults(func=cmd_generate)


def _add_info(sub) -> None:
    p = sub.add_parser("info", help="describe a checkpoint: languages, model, metrics")
    p.add_argument("checkpoint", help="a checkpoint file or an imported model's folder")
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    p.set_defaults(func=cmd_info)


def _add_gui(sub) -> None:
    p = sub.add_parser("gui", help="open the desktop app (the default when no command is given)")
    p.add_argument("checkpoint", nargs="?", help="checkpoint to open instead of the default model")
    p.set_defaults(func=cmd_gui)


def cmd_gui(args) -> int:
    from attnviz.gui.app import run_gui

    return run_gui(getattr(args, "checkpoint", None))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnviz", description="See what attention does inside a translation model.")
    parser.add_argument("--version", action="version", version=f"attnviz {__version__}")
    parser.add_argument("--self-test", action="store_true",
                        help="check this installation without showing a window: load the default model, translate "
                             "a sentence, check the attention shapes, print a JSON line (exit 0 when all is well)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_gui(sub)
    _add_translate(sub)
    _add_generate(sub)
    _add_info(sub)
    add_commands(sub)
    add_eval_commands(sub)
    add_convert(sub)
    cli_analysis.add_commands(sub)
    return parser


def _default_model() -> str:
    """The bundled model the app opens first, for ``translate`` without ``-m``."""
    from attnviz.gui.model_list import default_model_path  # reads file headers only: no Qt, no torch

    path = default_model_path()
    if path is None:
        raise InputError("no model given and no bundled model found: pass one with -m MODEL.safetensors")
    print(f"attnviz: using the default model {path} (choose another with -m)", file=sys.stderr)
    return path


def cmd_translate(args) -> int:
    from attnviz.cli.batch import read_lines, translate_lines, utf8_stdout, write_lines
    from attnviz.engine.config import DecodeConfig
    from attnviz.engine.export import save_attention
    from attnviz.engine.loading import load_translator

    if args.n_best and args.n_best > args.beam:
        raise InputError(f"--n-best {args.n_best} asks for more hypotheses than the beam keeps; use --beam "
                         f"{args.n_best} or more, or a smaller --n-best")
    lines = read_lines(args.sentences)
    args.model = args.model or _default_model()
    translator = load_translator(args.model)
    if not translator.has_source:
        raise InputError(f"{args.model} is a language model: it continues text instead of translating it. Use "
                         f"attnviz generate -m {args.model} --prefix TEXT")
    decode = DecodeConfig(max_len=args.max_len, beam=args.beam, length_penalty=args.length_penalty,
                          **head_settings(args, translator))
    # --attention and --n-best search each sentence as events (the same choice as the batched search), keeping the
    # chosen hypothesis' own attention and every finished hypothesis' score
    translate_lines(translator, lines, decode, capture=bool(args.attention), n_best=args.n_best or 0)
    if args.attention:
        done = [line for line in lines if line.translation is not None]
        found = [line.translation for line in done]
        if args.merge_subwords:
            from attnviz.engine.subwords import merge_translation

            found = [merge_translation(t, translator.src_spec, translator.tgt_spec) for t in found]
        save_attention(args.attention, found, translator.info, [line.text for line in done])
        print(f"attention of {len(found)} sentence(s) saved to {args.attention}", file=sys.stderr)
    utf8_stdout()
    failed = write_lines(lines, args.json, args.n_best or 0)
    if failed:
        print(f"attnviz: {failed} of {len(lines)} line(s) could not be translated (their output lines are empty)",
              file=sys.stderr)
    return 1 if failed else 0


def _recipe_decoding(translator):
    """The decoding settings of the recipe a model was trained with (stored in its checkpoint); sampling at
    temperature 1.0 with seed 0 when it stores none."""
    from attnviz.engine.config import DecodeConfig

    recipe = translator.card.recipe
    if recipe is not None and isinstance(recipe.get("decode"), dict):
        return DecodeConfig.from_dict(recipe["decode"])
    return DecodeConfig(temperature=1.0)


def cmd_generate(args) -> int:
    from attnviz.engine.config import DecodeConfig
    from attnviz.engine.export import save_attention
    from attnviz.engine.loading import load_translator

    if args.temperature is not None:
        DecodeConfig(temperature=args.temperature)  # validates before the model is read
    if args.n < 1:
        raise InputError(f"--n must be at least 1, not {args.n}")
    translator = load_translator(args.model)
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
    outputs = translator.generate(args.prefix, n, trained.replace(temperature=temperature, seed=seed))
    for w in outputs[0].warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.attention:
        save_attention(args.attention, outputs, translator.info)
        print(f"attention of {len(outputs)} sequence(s) saved to {args.attention}", file=sys.stderr)
    for t in outputs:
        if args.json:
            print(json.dumps({"prefix": args.prefix, "tokens": list(t.words), "text": t.text,
                              "probabilities": [round(p, 6) for p in t.probabilities],
                              "ended": bool(t.tokens) and t.tokens[-1] == "<eos>"}, ensure_ascii=False))
        else:
            print(t.text)
    return 0


INFO_FIGURES = ("bleu_tok", "sacrebleu", "chrf", "ppl", "accuracy", "loss", "sentences", "decode",
                "bleu_tok_float32", "bleu_tok_float16", "loss_float32", "loss_float16", "stored_as_float16")


def _format_info(card) -> str:
    """A checkpoint's card as the lines ``attnviz info`` prints."""
    lines = [
        f"{card.name or card.path}: {card.languages}",
        f"  model      {card.kind.name}: {card.kind.describe(card.config)}",
        f"  parameters {card.parameters:,}  (stored as {card.dtype})",
        f"  vocab      {card.src_vocab_size:,} {card.src_lang} / {card.tgt_vocab_size:,} {card.tgt_lang}",
    ]
    if card.preset:
        lines.append(f"  preset     {card.preset}")
    for split, metrics in card.metrics.items():
        values = metrics.to_dict()
        shown = ", ".join(f"{k} {values[k]:.4g}" if isinstance(values[k], float) else f"{k} {values[k]}"
                          for k in INFO_FIGURES if k in values)
        lines.append(f"  {split:<12} {shown}")
    return "\n".join(lines)


def cmd_info(args) -> int:
    from attnviz.engine.loading import read_card

    card = read_card(args.checkpoint)
    print(json.dumps(card.to_info(), indent=2, ensure_ascii=False) if args.json else _format_info(card))
    return 0


FLAGS = {  # an engine error's settings -> the flags that change them here
    "data_dir": "--data-dir or ATTNVIZ_DATA", "device": "--device", "preset": "--preset", "src": "--src",
    "ref": "--ref", "split": "--split",
}


def explain(exc: AttnvizError) -> str:
    """An engine error's message with this command line's way of fixing it."""
    message = str(exc)
    if exc.corpus:
        message += f" (attnviz data download {exc.corpus})"
    flags = [FLAGS[s] for s in exc.settings if s in FLAGS]
    return message + (f" [{', '.join(flags)}]" if flags else "")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as typed (train --nproc hands it on to torchrun)
    if args.self_test:
        from attnviz.cli.selftest import run_self_test

        return run_self_test()
    if args.command is None:
        args.func = cmd_gui
    try:
        return args.func(args)
    except InputError as exc:
        print(f"attnviz: error: {explain(exc)}", file=sys.stderr)
        return 2
    except AttnvizError as exc:
        print(f"attnviz: error: {explain(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("attnviz: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into a reader that stopped early (e.g. `| head`)
        sys.stderr.close()
        return 0
    except OSError as exc:  # a file the user named cannot be written (disk full, permissions): one line, no trace
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"attnviz: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
