"""What the analysis reports, named once and torch-free (the GUI imports it at start-up): the head statistics, the
thresholds of the tags, the alignment proxy and the contribution views."""

from __future__ import annotations

import re

# Language tags, which start a sentence (source or target) in multilingual models: Marian's ">>fra<<", M2M100's
# "__de__", NLLB's "deu_Latn", mBART-50's "de_DE" / "en_XX". The head statistics count them with <sos> and the
# sinks toggle hides them (a sink, not a word): one pattern for both.
LANGUAGE_TAG = re.compile(r">>[\w-]+<<|__[a-z]{2,3}(_[A-Za-z]+)?__|[a-z]{2,3}_[A-Z][A-Za-z]{1,3}")


def is_language_tag(token: str) -> bool:
    return LANGUAGE_TAG.fullmatch(token) is not None


STATS = ("entropy", "norm_entropy", "max_weight", "sos", "eos", "punct", "sink", "same", "prev", "next",
         "diag_distance")
SELF_ONLY = ("same", "prev", "next")
CROSS_ONLY = ("diag_distance",)

POSITIONAL_SHARE = 0.5  # positional: mean weight on one relative position (same, prev or next) at least this
SINK_SHARE = 0.5  # sink: mean weight on <sos>/language tags/<eos>/punctuation at least this
DIFFUSE_ENTROPY = 0.75  # diffuse: mean normalised entropy at least this
ALIGNING_PEAK = 0.5  # aligning (cross-attention): mean max weight at least this ...
ALIGNING_SINK = 0.3  # ... and sink share below this
THRESHOLDS = {"positional": f"same, prev or next >= {POSITIONAL_SHARE}", "sink": f"sink >= {SINK_SHARE}",
              "diffuse": f"norm_entropy >= {DIFFUSE_ENTROPY}",
              "aligning": f"cross-attention, max_weight >= {ALIGNING_PEAK} and sink < {ALIGNING_SINK}"}
PROXY = "alignment proxy = max_weight x (1 - sink), cross-attention only (no gold alignments needed)"

VIEWS = {"raw": "raw attention weights",
         "norm": "norm-weighted ||a f(x)||, rows renormalised to sum to 1",
         "rollout": "attention rollout (heads averaged, raw products)",
         "rollout-residual": "attention rollout with residual (0.5 A + 0.5 I, heads averaged)",
         "compare": "raw attention weights of the compared checkpoint (same output tokens teacher-forced)",
         "difference": "compared checkpoint's raw weights minus the loaded model's (colour scale per map)",
         "side-by-side": "raw attention weights: the loaded model (left) beside the compared checkpoint (right)"}
# The split head importance reads by default, in the CLI and the Analysis tab alike: which heads matter is a choice
# about the model (which to switch off), and such choices are made on validation data; the test split stays for
# the final figure (attnviz evaluate).
IMPORTANCE_SPLIT = "val"
SIDE_BY_SIDE = ("raw", "compare")  # the two views the side-by-side view shows, left and right
SIGNED_VIEWS = ("difference",)  # rows do not sum to 1: drawn on a diverging scale centred on zero


def note_lines(notes: dict) -> list[str]:
    """An LLM's notes on what its head figures are over (``llm_heads``), one line each: groups, windows, views."""
    lines = [f"note: {value}" for key, value in notes.items() if key.endswith("note") or key == "same_heads"]
    if notes.get("windowed_layers"):
        lines.append(f"sliding-window layers: {', '.join(map(str, notes['windowed_layers']))}")
    if notes.get("kv_groups"):
        groups = "; ".join(f"kv {g}: heads {', '.join(map(str, heads))}" for g, heads in
                           enumerate(notes["kv_groups"], 1))
        lines.append(f"grouped-query attention, {notes['kv_heads']} key/value heads shared by query heads: {groups}")
    return lines
