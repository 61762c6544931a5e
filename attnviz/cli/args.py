"""The command line's shared flags and argument types: a flag that several commands take is defined here once.

Every option value is checked where argparse reads it, through one typed converter (``Number``, made by
``int_range`` and ``float_range``; the named ones below): a value out of range (``--beam 100000``), not a number,
not finite (``nan``, ``inf``), empty or thousands of digits long, or an output path that is a folder or lies in a
folder that does not exist gives argparse's usage message and exit status 2 before any model is read, instead of a
traceback, a silently changed result or an allocation that never ends. The flags:
the corpus a measuring command reads (``--src``, its references, ``--split``, ``--limit``, ``--data-dir``), the
decoding settings (``--beam``, ``--length-penalty``, ``--max-len``, ``--int8``), the precision (``--dtype``), the
device (``--device``), a multilingual model's languages (``--src-lang``, ``--tgt-lang``), the heads switched off
(``--mask-heads``, ``--rescale-heads``) and the attention export (``--attention``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.engine.checkpoints.memory import AUTO, DEVICE_CHOICES, DTYPE_CHOICES
from attnviz.engine.errors import CheckpointError, InputError, quoted
from attnviz.engine.hub.names import model_path

if TYPE_CHECKING:
    from attnviz.engine.config import DecodeConfig
    from attnviz.engine.plain.translator import PlainTranslator
    from attnviz.engine.translator import Translator

MAX_BEAM = 64  # wider beams give no better translations and need beam x batch decoder states
MAX_LEN = 1000


_WHOLE = re.compile(r"\s*[+-]?\d{1,30}\s*", re.ASCII)  # 30 digits: more than any count or seed needs


class Number:
    """An argparse type: a finite number (``int`` or ``float``) from ``low`` to ``high``, either side open when
    ``None``. It refuses text that is not such a number (``nan``, ``inf``, empty, thousands of digits, which ``int``
    itself refuses with an error about Python's digit limit) with one line that quotes the value cut short. Every
    numeric option of every command has one of these as its type (a test walks the parsers to check)."""

    def __init__(self, kind: type[int] | type[float], low: float | None = None, high: float | None = None):
        self.kind, self.low, self.high = kind, low, high
        self.__name__ = "whole number" if kind is int else "number"  # what argparse calls the type

    def __call__(self, text: str) -> Any:
        if self.kind is int:
            if not _WHOLE.fullmatch(text):
                raise argparse.ArgumentTypeError(f"expected a whole number, not {quoted(text)}")
            value: float = int(text)
        else:
            try:
                value = float(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected a number, not {quoted(text)}") from None
        if not (math.isfinite(value) and (self.low is None or value >= self.low)
                and (self.high is None or value <= self.high)):
            shown = f"{value:,}" if self.kind is int else quoted(text)
            raise argparse.ArgumentTypeError(f"must be {'' if self.kind is int else 'a number '}{self.bounds()}, "
                                             f"not {shown}")
        return value

    def bounds(self) -> str:
        form = "{:,}" if self.kind is int else "{:g}"
        if self.low is None and self.high is None:
            return "that is finite"
        if self.low is None or self.high is None:
            return f"at least {form.format(self.low)}" if self.low is not None else f"at most {form.format(self.high)}"
        return f"from {form.format(self.low)} to {form.format(self.high)}"



def int_range(low: int | None, high: int | None) -> Number:
    """An argparse type: a whole number from ``low`` to ``high``."""
    return Number(int, low, high)


def float_range(low: float | None, high: float | None) -> Number:
    """An argparse type: a finite number from ``low`` to ``high``."""
    return Number(float, low, high)


def output_file(text: str) -> str:
    """An argparse type: a file to write, not a folder, in a folder that exists."""
    path = Path(text)
    if not text or path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; give a file name such as {path / 'attention.npz'}")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"the folder {str(path.parent)!r} does not exist")
    return text


BEAM = int_range(1, MAX_BEAM)
MAX_LENGTH = int_range(1, MAX_LEN)
LENGTH_PENALTY = float_range(0.0, 10.0)
WHOLE_NUMBER = int_range(None, None)  # a setting whose range its config checks (train's recipe flags)
FINITE_NUMBER = float_range(None, None)
PROBABILITY = float_range(0.0, 1.0)
HEAD_NUMBER = int_range(1, 10**6)  # a layer or head, from 1 as every output numbers them; the model says how many


DATA_DIR_HELP = "folder with the corpora (default: $ATTNVIZ_DATA or the user data folder)"
MASK_HELP = ("switch attention heads off while decoding: KIND:LAYER.HEAD, 1-based, comma-separated, LAYER.* for a "
             "whole layer; KIND is enc, dec or cross (e.g. cross:3.1,cross:3.4,enc:2.*). An off head's weights are "
             "zeroed")


def add_model(p: argparse.ArgumentParser, help: str | None = None) -> None:
    """``-m MODEL``, required: the checkpoint a command reads (``translate`` has its own: it has a default)."""
    p.add_argument("-m", "--model", required=True, help=help)


def one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    """An argparse type taking exactly one of ``choices`` (a refusal names them and quotes the value, cut)."""
    def choice(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(choices)}, not {quoted(text)}")
        return text

    return choice


dtype_choice = one_of(DTYPE_CHOICES)  # a precision a model can run at (``engine.checkpoints.memory``)
# a device a model can be asked to run on; whether the machine has it is known only when the model is loaded (torch)
device_choice = one_of(DEVICE_CHOICES)


def add_dtype(p: argparse.ArgumentParser, default: str | None = AUTO) -> None:
    """``--dtype``: the precision the model runs at (the app's File > Precision setting)."""
    p.add_argument("--dtype", type=dtype_choice, default=default, metavar="{" + ",".join(DTYPE_CHOICES) + "}",
                   help="precision the model runs at: auto (float32 on the CPU; a decoder-only LLM at its stored "
                        "precision), float32, or float16/bfloat16 (half the memory; a model too large for the free "
                        "memory is refused with the figures)")


def add_device(p: argparse.ArgumentParser) -> None:
    """``--device``: where the model runs (a decoder-only LLM on a CUDA GPU; every other kind on the CPU)."""
    p.add_argument("--device", type=device_choice, default="cpu", metavar="{" + ",".join(DEVICE_CHOICES) + "}",
                   help="where the model runs: cpu (default), cuda (a decoder-only LLM on the GPU; refused without "
                        "one, or for another kind), or auto (the GPU when there is one and the model runs there)")


def check_model(path: str | None) -> None:
    """``-m MODEL`` names a file or folder that exists, or a model the Hugging Face cache or Ollama holds: a
    mistyped path is said in one line (exit status 2) before torch or the model is read."""
    if path:
        try:
            model_path(path)
        except CheckpointError as exc:
            raise InputError(str(exc)) from None


def add_data_dir(p: argparse.ArgumentParser, help: str = DATA_DIR_HELP) -> None:
    p.add_argument("--data-dir", help=help)


def add_limit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int_range(0, 10**9), default=0, help="only the first N sentences (0 = all)")


def add_corpus(p: argparse.ArgumentParser, split: str, reference: str, reference_help: str) -> None:
    """The sentences a measuring command reads: a split of the model's own corpus (``split`` by default), or a
    source file with its references, given by the flag ``reference`` (``--ref`` or ``--tgt``)."""
    p.add_argument("--src", help="source sentences, one per line, plain or .gz (default: the model's corpus split)")
    p.add_argument(reference, help=reference_help)
    p.add_argument("--split", default=split, choices=["val", "test"], help=f"split of the model's corpus ({split})")
    add_limit(p)
    add_data_dir(p)


def add_decoding(p: argparse.ArgumentParser) -> None:
    """How a command decodes: beam width, length penalty and the output length limit, from the model's own
    configuration or attnviz's (``decoding`` resolves them once the model is read)."""
    p.add_argument("--beam", type=BEAM, help=f"beam width (1 = greedy, attnviz's default; at most {MAX_BEAM})")
    p.add_argument("--length-penalty", type=LENGTH_PENALTY,
                   help="length penalty alpha for beam search (0 to 10; attnviz's default 1.0, GNMT's rule)")
    p.add_argument("--max-len", type=MAX_LENGTH, help="most output tokens per sentence (attnviz's default 50)")
    p.add_argument("--decoding", choices=("model", "attnviz"), default="model",
                   help="an imported model's decoding as its authors configured it in generation_config.json "
                        "(model, the default; said on stderr), or attnviz's own settings (attnviz); --beam, "
                        "--length-penalty and --max-len change either")


def decoding(args: argparse.Namespace, translator: Translator | PlainTranslator, **fields: Any) -> DecodeConfig:
    """The ``DecodeConfig`` of ``add_decoding``'s flags (and ``fields``): the model's configured decoding, said on
    stderr, unless ``--decoding attnviz`` or the model configures none; the flags given change it."""
    from attnviz.engine.config import DecodeConfig

    given = {name: value for name, value in (("beam", args.beam), ("length_penalty", args.length_penalty),
                                             ("max_len", args.max_len)) if value is not None}
    card = translator.card
    configured = card.decoding if args.decoding == "model" else None
    if configured is None:
        return DecodeConfig(**given, **fields)
    decode = configured.replace(**given, **fields)
    changed = ", ".join("--" + name.replace("_", "-") for name in given)
    print(f"attnviz: decoding {card.decoding_label(decode, changed)} (--decoding attnviz for attnviz's own settings)",
          file=sys.stderr)
    return decode


def add_languages(p: argparse.ArgumentParser) -> None:
    """The languages of a multilingual model (NLLB-200, M2M100, mBART-50), by ISO 639 code or the model's tag."""
    p.add_argument("--src-lang", metavar="LANG",
                   help="a multilingual model's source language (de, fra, deu_Latn, __de__, de_DE...; default: "
                        "guessed from each sentence's script and frequent words, said in a warning)")
    p.add_argument("--tgt-lang", metavar="LANG", help="a multilingual model's target language (default: English)")


def add_prompt(p: argparse.ArgumentParser) -> None:
    """``--prompt``: the instruction a decoder-only LLM reads each sentence in."""
    p.add_argument("--prompt", metavar="TEMPLATE",
                   help="an LLM's instruction, with {text} where the sentence goes ({src_lang} and {tgt_lang} name "
                        "the languages); default: 'Translate the following text from {src_lang} into {tgt_lang}.\\n"
                        "{src_lang}: {text}\\n{tgt_lang}:', rendered by the folder's chat template")


def add_int8(p: argparse.ArgumentParser) -> None:
    """``--int8``: decode with int8 linear layers (``engine.models.quantize``), for batch translation and scores."""
    p.add_argument("--int8", action="store_true",
                   help="quantise the linear layers to int8 (dynamic, CPU): faster on many sentences at a small BLEU "
                        "cost (README: Speed and memory); attention maps are the int8 network's own")


def apply_int8(args: argparse.Namespace, translator: Translator) -> None:
    """With ``--int8``, quantise the loaded model (refused in one line where it cannot run: not float32, not CPU)."""
    if args.int8:
        from attnviz.engine.models.quantize import int8_summary, quantize_int8

        quantize_int8(translator.model)
        print(f"attnviz: int8: {int8_summary(translator.model)}", file=sys.stderr)


def add_attention_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("--attention", metavar="OUT.npz", type=output_file,
                   help="save every attention matrix with token labels")


def add_head_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mask-heads", metavar="SPEC", help=MASK_HELP)
    p.add_argument("--rescale-heads", action="store_true",
                   help="with --mask-heads: multiply a layer's remaining heads by H / (H - off) so its output keeps "
                        "its size (default: leave them as they are)")


def head_settings(args: argparse.Namespace, translator: Translator) -> dict[str, Any]:
    """``DecodeConfig`` fields for ``--mask-heads``/``--rescale-heads``, checked against the loaded model."""
    from attnviz.engine.heads import parse_heads

    if not args.mask_heads:
        if args.rescale_heads:
            raise InputError("--rescale-heads rescales the heads left on by --mask-heads; give --mask-heads SPEC too")
        return {}
    try:
        refs = parse_heads(args.mask_heads, translator.kind.layout(translator.config))
    except InputError as exc:
        raise InputError(f"--mask-heads: {exc}") from None
    if not refs:
        raise InputError("--mask-heads names no head; write e.g. cross:3.1 or enc:2.*")
    return {"heads_off": refs, "rescale_heads": args.rescale_heads}
