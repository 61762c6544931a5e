"""``attnviz info``: describe a checkpoint (languages, model, parameters, vocabularies, metrics) from its card.

The card is read from the file's header without torch, so ``info`` answers at once even for a large model. It is
its own module rather than part of ``convert`` or ``translate``: it reads no weights and decodes nothing.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attnviz.engine.checkpoints.card import ModelCard


def add_command(sub) -> None:
    p = sub.add_parser("info", help="describe a checkpoint: languages, model, metrics")
    p.add_argument("checkpoint", help="a checkpoint file or an imported model's folder")
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    p.set_defaults(func=cmd_info)


INFO_FIGURES = ("bleu_tok", "sacrebleu", "chrf", "ppl", "accuracy", "loss", "sentences", "decode",
                "bleu_tok_float32", "bleu_tok_float16", "loss_float32", "loss_float16", "stored_as_float16")


def _format_info(card: ModelCard) -> str:
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


def cmd_info(args: argparse.Namespace) -> int:
    from attnviz.engine.loading import read_card

    card = read_card(args.checkpoint)
    print(json.dumps(card.to_info(), indent=2, ensure_ascii=False) if args.json else _format_info(card))
    return 0
