"""The ``attnviz`` command line: the parser of every sub-command, the exit codes, and ``main``.

Each group of sub-commands lives in its own module (``translate``, ``info``, ``data``, ``train``, ``evaluate``,
``analysis``, ``convert``; flags several of them share in ``args``) and adds its parsers here. Errors a user can
cause (``AttnvizError``) are printed as one line on stderr with exit status 1, or 2 for bad input; they never show
a traceback. ``attnviz`` with no command, or ``attnviz gui``, opens the desktop app; it and ``--self-test`` (which
builds the app's window offscreen) are all of the command line that imports the GUI.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from attnviz._version import __version__
from attnviz.cli import analysis, attribute, calibrate, convert, data, evaluate, info, models, train, translate
from attnviz.cli.args import add_dtype, check_model
from attnviz.engine.errors import AttnvizError, InputError, is_panic


def _add_gui(sub) -> None:
    p = sub.add_parser("gui", help="open the desktop app (the default when no command is given)")
    p.add_argument("checkpoint", nargs="?", help="checkpoint or model folder to open instead of the default model")
    add_dtype(p, default=None)  # none given: the app's remembered File > Precision
    p.set_defaults(func=cmd_gui)


def cmd_gui(args: argparse.Namespace) -> int:
    from attnviz.gui.app import run_gui

    return run_gui(getattr(args, "checkpoint", None), getattr(args, "dtype", None))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnviz", description="See what attention does inside a translation model.")
    parser.add_argument("--version", action="version", version=f"attnviz {__version__}")
    parser.add_argument("--self-test", action="store_true",
                        help="check this installation without showing a window: load the default model, translate "
                             "a sentence, check the attention shapes, print a JSON line (exit 0 when all is well)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_gui(sub)
    translate.add_commands(sub)
    info.add_command(sub)
    data.add_command(sub)
    train.add_commands(sub)
    evaluate.add_commands(sub)
    convert.add_command(sub)
    analysis.add_commands(sub)
    attribute.add_command(sub)
    calibrate.add_command(sub)
    models.add_commands(sub)
    return parser


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
        check_model(getattr(args, "model", None))
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
    except BaseException as exc:
        if not is_panic(exc):
            raise
        said = str(exc).splitlines()[0][:160] if str(exc) else "a panic"
        print(f"attnviz: error: the model's tokenizer failed ({said}); its tokenizer file is broken: download the "
              "model again.", file=sys.stderr)
        return 1
