"""``attnviz convert``: an imported model's folder (any format registered in ``engine.hub``) into one attnviz
checkpoint file.

The file holds the weights, the config, both vocabularies and both tokenizer models, so it loads with no other
file; every command and the app accept it like any attnviz checkpoint.
"""

from __future__ import annotations

import re
import sys

from attnviz.engine.errors import InputError
from attnviz.engine.heads import number


def add_command(sub) -> None:
    p = sub.add_parser("convert", help="turn an imported model's folder into one attnviz checkpoint file",
                       description="Read an imported model's folder, in a format attnviz reads (`attnviz info FOLDER` "
                                   "describes it), and write one .safetensors checkpoint.")
    p.add_argument("folder", help="the model folder, as downloaded from the Hugging Face Hub")
    p.add_argument("--out", required=True, metavar="MODEL.safetensors", help="the checkpoint to write")
    p.add_argument("--name", help="display name stored in the file (default: the folder's name)")
    p.add_argument("--half", action="store_true", help="store float16 weights (half the size)")
    p.add_argument("--alignment-head", metavar="LAYER.HEAD",
                   help="the cross-attention head trained with guided alignment (1-based, e.g. 6.1 for the first "
                        "head of the last layer of an OPUS-MT transformer-align model); the app marks it")
    p.set_defaults(func=cmd_convert)


def parse_head(text: str, layers: int, heads: int) -> list[int]:
    """``"6.1"`` -> ``[5, 0]`` (0-based), checked against the model's layers and heads."""
    match = re.fullmatch(r"(\d+)\.(\d+)", text.strip(), re.ASCII)
    if not (match and 1 <= number(match[1]) <= layers and 1 <= number(match[2]) <= heads):
        shown = text if len(text) <= 40 else text[:20] + "..."
        raise InputError(f"--alignment-head must be LAYER.HEAD with layer 1-{layers} and head 1-{heads}, not {shown!r}")
    return [number(match[1]) - 1, number(match[2]) - 1]


def cmd_convert(args) -> int:
    from pathlib import Path

    from attnviz.engine.errors import CheckpointError
    from attnviz.engine.hub import find_format, folder_formats, format_of
    from attnviz.engine.loading import load_translator

    found = find_format(args.folder)
    if found is None or found.reads != "folder":
        if Path(args.folder).is_dir():  # a model folder of a family attnviz does not implement says which
            try:
                format_of(args.folder)
            except CheckpointError as exc:
                raise InputError(str(exc)) from None
        known = "; ".join(f.title for f in folder_formats())
        raise InputError(f"{args.folder} is not a model folder that attnviz imports; give the folder of one of: "
                         f"{known}.")
    translator = load_translator(args.folder)  # every check translate makes: convert writes nothing it refuses
    extra = {"name": args.name or Path(args.folder).resolve().name}
    if args.alignment_head:
        layers, heads = translator.kind.layout(translator.config)["cross"]
        extra["alignment_head"] = parse_head(args.alignment_head, layers, heads)
    translator.save(args.out, half=args.half, **extra)
    card = translator.card
    print(f"wrote {args.out}: {card.languages}, {card.parameters:,} parameters", file=sys.stderr)
    return 0
