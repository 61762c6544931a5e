"""Head statistics and head importance of a decoder-only LLM (a kind that ``reads_prompt``): which keys each row of
its one attention may see, what its grouped-query heads share, and what the figures are computed over.

An LLM's attention per layer is one softmax, seen three ways (``kinds.llm``): the prompt over itself
(``encoder``, causal), each output step over the prompt (``cross``) and over the output so far (``decoder``,
causal). For the statistics:

- ``cross`` rows are taken over the WHOLE prompt (template, instruction and sentence: where a head puts its weight
  among them, the beginning-of-text and template sinks included, is what the statistics describe), each row
  renormalised over the prompt's columns, so it sums to 1 as a cross-attention row does; the sentence's span alone
  is what ``attnviz align`` reads. The diagonal distance is left out (NaN): a prompt has no diagonal to the output.
- The prompt's last token is the first output step's input, not a key of the prompt's maps: it is left out.
- A head of a sliding-window layer: its normalised entropy divides by the log of the keys its window lets it see,
  not of every earlier key (the keys outside the window carry exactly zero weight, so the other figures are
  unchanged by them). An output step whose window reaches no prompt key at all (an output longer than the window)
  has an empty ``cross`` row: it counts zero in every figure of that layer.
- Grouped-query attention: query heads ``g * H/G .. (g + 1) * H/G - 1`` share key/value head ``g``; the groups are
  reported beside the statistics and the importance (each query head keeps its own figures).

Head importance switches a head off in all three views at once (they are one head), so each head is measured once.
Names: B batch, L layers, H query heads, G key/value heads, Tq queries, Tk keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.engine.hub.llm_prompt import prompt_reader
from attnviz.engine.text.vocab import PAD_ID

if TYPE_CHECKING:  # the notes are read by the GUI at start-up, before torch: only ``prompt_rows`` needs it
    from torch import Tensor

    from attnviz.engine.translator import Translator

PROMPT_NOTE = ("cross: each output step's row over the whole prompt (template, instruction and sentence), "
               "renormalised over the prompt's columns; the prompt's last token is the first output step's input, "
               "not a key; the diagonal distance does not apply")
WINDOW_NOTE = ("a head of a sliding-window layer: its normalised entropy counts only the keys within its window "
               "(those outside carry no weight by construction)")
SAME_HEADS_NOTE = "each head switched off in the prompt's pass and every output step at once: measured once"


def kv_groups(translator: Translator) -> dict[str, Any]:
    """Grouped-query attention's groups (heads numbered from 1), or nothing when every head has its own keys."""
    heads, groups = translator.config.heads, translator.kind.kv_heads(translator.config)
    if not groups or groups >= heads or heads % groups:
        return {}
    size = heads // groups
    return {"kv_heads": groups, "query_heads_per_kv_head": size,
            "kv_groups": [list(range(g * size + 1, (g + 1) * size + 1)) for g in range(groups)]}


def windowed_layers(translator: Translator) -> list[int]:
    """Layers (from 1) whose sliding window hides some key of a long enough sentence."""
    cfg, kind = translator.config, translator.kind
    return [layer + 1 for layer in range(cfg.dec_layers)
            if kind.outside_window(cfg, "encoder", layer, 0, 1024, 1024) is not None]


def stats_notes(translator: Translator) -> dict[str, Any]:
    """What an LLM's statistics are computed over (nothing for other kinds)."""
    if not translator.kind.reads_prompt:
        return {}
    layers = windowed_layers(translator)
    window = {"windowed_layers": layers, "window_note": WINDOW_NOTE} if layers else {}
    return {"prompt_note": PROMPT_NOTE, "not_applicable": {"cross": ["diag_distance"]}, **window,
            **kv_groups(translator)}


def prompt_card(translator: Translator, sources: Sequence[str]) -> dict[str, Any]:
    """What reproduces an LLM's prompts (nothing for other kinds): the instruction, the languages it names, each
    sentence's span ``[first, last)`` in its prompt and the first prompt as read."""
    if not translator.kind.reads_prompt:
        return {}
    reader = prompt_reader(translator)
    return {"prompt": reader.prompt_template,
            "prompt_languages": [translator.src_spec.lang, translator.tgt_spec.lang],
            "spans": [list(reader.prompt(text).span) for text in sources],
            "first_prompt": reader.prompt(sources[0]).text if sources else None}


def importance_notes(translator: Translator) -> dict[str, Any]:
    if not translator.kind.reads_prompt:
        return {}
    return {"same_heads": SAME_HEADS_NOTE, **kv_groups(translator)}


def distinct_kinds(translator: Translator, layout: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """``layout`` with one kind kept of those whose heads are the same heads (``ModelKind.same_heads``)."""
    out, carried = {}, set()
    for kind, shape in layout.items():
        carriers = frozenset(translator.kind.same_heads.get(kind, (kind,)))
        if carriers not in carried:
            carried.add(carriers)
            out[kind] = shape
    return out


def prompt_rows(translator: Translator, kind: str, attn: Tensor, src: Tensor, tgt_in: Tensor
                ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """An LLM batch's ``kind`` attention [B, L, H, Tq, Tk] as ``stats.row_statistics`` reads it: (attention, real
    queries [B, Tq], key ids [B, Tk] (PAD_ID where no key), keys each row may see [B, L, Tq, Tk])."""
    import torch
    cfg, model_kind = translator.config, translator.kind
    tq, tk = attn.shape[-2:]
    shown = (src != PAD_ID).sum(1) - 1  # [B] prompt tokens shown; the last is the first output step's input
    column = torch.arange(src.size(1))[None]
    prompt_ids = torch.where(column < shown[:, None], src, PAD_ID)
    if kind == "decoder":
        queries, keys = tgt_in != PAD_ID, tgt_in
    else:
        keys = prompt_ids[:, :tk]
        queries = keys != PAD_ID if kind == "encoder" else tgt_in != PAD_ID
    seen = (keys != PAD_ID)[:, None, None, :].expand(-1, cfg.dec_layers, tq, -1).clone()
    if kind != "cross":  # causal
        seen &= torch.ones(tq, tk, dtype=torch.bool).tril()
    for b, length in enumerate(shown.tolist()):
        for layer in range(cfg.dec_layers):
            hidden = model_kind.outside_window(cfg, kind, layer, length, tq, tk)
            if hidden is not None:
                seen[b, layer] &= ~torch.as_tensor(np.asarray(hidden))
    if kind == "cross":
        attn = attn / attn.sum(-1, keepdim=True).clamp(min=1e-12)
    return attn, queries, keys, seen
