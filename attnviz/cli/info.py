"""``attnviz info``: describe a checkpoint (languages, model, parameters, vocabularies, metrics) from its card, and
say what was checked.

Without ``--check`` nothing is read of the weights but their index (``engine.loading.inspect_model``: a header's
framing, every tensor's name, shape and offsets against the model's config, the model's size on torch's meta
device), so ``info`` answers quickly even for a large model and says "not checked: values"; ``--check`` reads every
weight as loading does (finite values). It says the parameter count, the memory the weights take at each dtype and
the dtype they would run at (``--dtype``). A file or folder that fails a check exits 1 with its one-line reason. It is
its own module rather than part of ``convert`` or ``translate``: it decodes nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from attnviz.cli.args import add_dtype
from attnviz.cli.jsonout import json_text
from attnviz.engine.checkpoints.memory import (
    DTYPES,
    ESTIMATE_ANSWER,
    ESTIMATE_PROMPT,
    memory_by_dtype,
    resolve_dtype,
    run_bytes,
    size_text,
)
from attnviz.engine.models.llm_arch import LLMArch

if TYPE_CHECKING:
    from attnviz.engine.checkpoints.card import ModelCard
    from attnviz.engine.loading import Inspection


def add_command(sub) -> None:
    p = sub.add_parser("info", help="describe a checkpoint: languages, model, metrics")
    p.add_argument("checkpoint", help="a checkpoint file or an imported model's folder")
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    p.add_argument("--check", action="store_true",
                   help="also read every weight and check its values (slower: the whole model is loaded, at --dtype)")
    add_dtype(p)
    p.set_defaults(func=cmd_info)


INFO_FIGURES = ("bleu_tok", "sacrebleu", "chrf", "ppl", "accuracy", "loss", "sentences", "decode",
                "bleu_tok_float32", "bleu_tok_float16", "loss_float32", "loss_float16", "stored_as_float16")


def _format_info(card: ModelCard, dtype: str) -> str:
    """A checkpoint's card as the lines ``attnviz info`` prints; ``dtype`` is the --dtype asked for."""
    memory = ", ".join(f"{size_text(n)} at {d}" for d, n in memory_by_dtype(card.parameters).items())
    lines = [
        f"{card.name or card.path}: {card.languages}",
        f"  model      {card.kind.name}: {card.kind.describe(card.config)}",
        f"  parameters {card.parameters:,}  (stored as {card.dtype}, runs as {_runs_as(card, dtype)} with --dtype "
        f"{dtype})",
        f"  memory     {memory}",
        f"  decoding   about {size_text(run_bytes(card.kind, card.config, _runs_as(card, dtype)))} more for a "
        f"{ESTIMATE_PROMPT + ESTIMATE_ANSWER}-token decode at {_runs_as(card, dtype)} (key/value cache, every "
        "attention map kept)",
        _vocab_line(card),
    ]
    if card.preset:
        lines.append(f"  preset     {card.preset}")
    label = card.decoding_label()
    if label:
        lines.append(f"  decoding   {label}")
    lines += _language_lines(card.language_tags)
    for split, metrics in card.metrics.items():
        values = metrics.to_dict()
        shown = ", ".join(f"{k} {values[k]:.4g}" if isinstance(values[k], float) else f"{k} {values[k]}"
                          for k in INFO_FIGURES if k in values)
        lines.append(f"  {split:<12} {shown}")
    return "\n".join(lines)


def _vocab_line(card: ModelCard) -> str:
    """The vocabularies as the model has them: an LLM's one table of its embedding's rows (the ids attnviz adds for
    its own search are not the model's), an encoder-decoder's source and target sizes."""
    if card.kind.reads_prompt:
        rows = LLMArch.from_dict(card.config.arch).vocab
        return f"  vocab      {rows:,} tokens (the embedding's rows), one vocabulary for the prompt and the answer"
    return f"  vocab      {card.src_vocab_size:,} {card.src_lang} / {card.tgt_vocab_size:,} {card.tgt_lang}"


def _language_lines(languages: Mapping[str, Any] | None, shown: int = 8) -> list[str]:
    """A multilingual model's language tags: how many, the first few, the defaults and how to pick."""
    tags = languages.get("tags") if languages else None
    if languages is None or not isinstance(tags, list) or not tags:
        return []
    more = f", ... ({len(tags) - shown} more)" if len(tags) > shown else ""
    src = languages.get("src") or "guessed from the text"
    return [f"  languages  {len(tags)} tags: {', '.join(map(str, tags[:shown]))}{more}",
            f"             into {languages.get('tgt')} by default, from: {src}; pick with --src-lang and --tgt-lang "
            "(an ISO code such as de or fra, or a tag)"]


def _format_checks(inspection: Inspection) -> str:
    lines = [f"  checked    {what}" for what in inspection.checked]
    lines += [f"  note       {note}" for note in inspection.notes]
    lines += [f"  not checked: {what}" for what in inspection.not_checked]
    return "\n".join(lines)


def _runs_as(card: ModelCard, dtype: str) -> str:
    return resolve_dtype(dtype, card.dtype if card.dtype in DTYPES else "float32",
                         keep_stored=card.kind.stored_precision)


def cmd_info(args: argparse.Namespace) -> int:
    from attnviz.engine.loading import check_model, inspect_model

    inspection = check_model(args.checkpoint, args.dtype) if args.check else inspect_model(args.checkpoint)
    if args.json:
        checks = {"checked": list(inspection.checked), "notes": list(inspection.notes),
                  "not_checked": list(inspection.not_checked)}
        precision = {"runs_as": _runs_as(inspection.card, args.dtype),
                     "memory_bytes": memory_by_dtype(inspection.card.parameters),
                     "decode_bytes": {d: run_bytes(inspection.card.kind, inspection.card.config, d) for d in DTYPES},
                     "decode_tokens": ESTIMATE_PROMPT + ESTIMATE_ANSWER}
        print(json_text(inspection.card.to_info() | precision | {"checks": checks}, indent=2, ensure_ascii=False))
    else:
        print(_format_info(inspection.card, args.dtype) + "\n" + _format_checks(inspection))
    return 0
