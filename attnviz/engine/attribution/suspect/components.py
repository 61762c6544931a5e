"""The "suspect translation" score: signs of a hallucination read from what one decode holds, each kept, and a
ranking of a corpus by all of them together. Torch-free (numpy); ``suspect.corpus`` runs the decodes.

Components of one translation (cross-attention: the last layer, heads averaged, rows = output tokens):

- ``seq_logprob``: sum of log p(chosen) over the output tokens (``<eos>`` included); ``mean_logprob``: the same per
  token (Seq-Logprob of Guerreiro et al. 2023, length-normalised). Low: suspect.
- ``attn_ign_src`` (Berard et al. 2019, as Guerreiro et al. 2023 "Looking for a needle in a haystack" use it): the
  share of source words (``<sos>``/``<eos>`` and language tags not counted) whose total incoming cross-attention
  over the output tokens is below ``IGNORED`` (0.2). High: suspect (the output ignores the source).
- ``sink_mass``: the cross-attention mass on ``<sos>``/``<eos>``/punctuation/language tags, averaged over output
  tokens. High: suspect (attention parked where nothing is read).
- ``wass_to_unif`` (Guerreiro et al. 2023, "Optimal transport for unsupervised hallucination detection"): the
  Wasserstein distance, with the 0/1 cost, between the source attention mass distribution (cross-attention
  averaged over output tokens) and the uniform distribution over the source tokens; with the 0/1 cost it is the
  total variation 0.5 sum_j |p_j - 1/S|. High: suspect.
- ``alti_source_share`` (Dale et al. 2023, "Detecting and mitigating hallucinations in machine translation"): the
  ALTI+ share of the source, averaged over output tokens. Low: suspect. Absent for models ALTI+ is not defined for.

A decoder-only LLM has no cross-attention: its "cross" rows are each output step's attention over the prompt, one
softmax shared with its own prefix. Attn-ign-SRC and Wass-to-Unif are then computed on the slice of those rows over
the sentence's own tokens (the source SPAN of the prompt, ``EncoderPass.span``), each row renormalised to sum to 1
over the span, so 0.2 and the uniform distribution mean what they mean for an encoder-decoder; sink mass stays the
raw mass on the whole prompt's sinks (its BOS, template markers, line breaks, punctuation); ``alti_source_share`` is
ALTI's share of the span (``mixing.capture``: prompt and output as one stream), the instruction and template tokens
not counted.

- ``unk_share``: the share of output tokens (``<eos>`` not counted) that are ``<unk>``; ``repeats``: the most copies
  in a row of any 1- to 16-token sequence of the output ("a man a man a man": 3). Not voted: each flags an output
  past its own line (``suspect.rule``), with the reason.

How the components make a verdict and a ranking is ``suspect.rule``'s: weighted by the separation each reached on
the model's own held-out data (``suspect.calibrate``), or, for a model never calibrated, log-prob per token alone,
said so. ``seq_logprob`` and ``sink_mass`` are shown, never voted. Names: S source, T target.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnviz.engine.analysis.sinks import is_punctuation, is_sink, sink_columns
from attnviz.engine.errors import InputError
from attnviz.engine.events import EncoderPass, Translation
from attnviz.engine.text.tokenize import WORD_START

IGNORED = 0.2  # Attn-ign-SRC's threshold on a source word's total incoming attention (Berard et al. 2019)
# component -> +1 when a higher value is more suspect, -1 when a lower one is (the direction the literature gives;
# a calibration measures whether it holds on a model); 0: a count shown and flagged past a line, never ranked
DIRECTION = {"mean_logprob": -1, "attn_ign_src": 1, "sink_mass": 1, "wass_to_unif": 1, "alti_source_share": -1,
             "seq_logprob": -1, "unk_share": 1, "repeats": 1}
COMPONENTS = tuple(DIRECTION)
LABELS = {"mean_logprob": "log-prob / token", "attn_ign_src": "Attn-ign-SRC", "sink_mass": "sink mass",
          "wass_to_unif": "Wass-to-Unif", "alti_source_share": "ALTI+ source", "seq_logprob": "log-prob",
          "unk_share": "<unk> share", "repeats": "repeats"}
UNK = "<unk>"
# what the components read for a decoder-only LLM (the tooltips and a ranking's notes say it)
SPAN_NOTE = ("A decoder-only LLM has no cross-attention: Attn-ign-SRC and Wass-to-Unif read each output step's "
             "attention over the prompt (last layer, heads averaged), cut to the sentence's own tokens and each row "
             "renormalised over them; sink mass is the raw mass on the whole prompt's sinks; ALTI source is ALTI's "
             "share of the sentence's tokens (prompt and output as one sequence), the instruction and template not "
             "counted")
SPAN_SHORT = ("A decoder-only LLM has no cross-attention: Attn-ign-SRC, Wass-to-Unif and ALTI source read the "
              "sentence's span of its prompt")  # a ranking's note (SPAN_NOTE in its tooltip)
LONGEST_REPEATED = 16  # the longest token sequence whose copies in a row ``repeats`` counts (half a sentence)


def _words(src_tokens: Sequence[str]) -> np.ndarray:
    """[S] True at the source words Attn-ign-SRC counts: not <sos>/<eos>/a language tag (punctuation counts)."""
    return np.array([not is_sink(t) or is_punctuation(t.lstrip(WORD_START)) for t in src_tokens], dtype=bool)


def attention_components(cross: np.ndarray, src_tokens: Sequence[str]) -> dict[str, float]:
    """Attn-ign-SRC, sink mass and Wass-to-Unif of one layer's head-averaged cross-attention [T, S]."""
    t, s = cross.shape
    if s != len(src_tokens) or t == 0 or s == 0:
        raise ValueError(f"cross-attention of shape {cross.shape} for {len(src_tokens)} source tokens")
    incoming = cross.sum(0)  # [S] total attention each source token receives
    words = _words(src_tokens)
    ignored = float((incoming[words] < IGNORED).mean()) if words.any() else float("nan")
    sinks = sink_columns(src_tokens)
    mass = incoming / t  # the source attention mass distribution, sums to 1
    return {"attn_ign_src": ignored, "sink_mass": float(cross[:, sinks].sum(-1).mean()),
            "wass_to_unif": float(0.5 * np.abs(mass - 1.0 / s).sum())}


def repeats(tokens: Sequence[str]) -> int:
    """The most copies in a row of any sequence of 1 to ``LONGEST_REPEATED`` tokens (1: nothing repeats; 0: no
    tokens); runs of ``<unk>`` alone are not counted. "a man a man a man ." -> 3; "a dog and a cat" -> 1."""
    best = 1 if tokens else 0
    for n in range(1, LONGEST_REPEATED + 1):
        for start in range(len(tokens) - 2 * n + 1):
            if all(t == UNK for t in tokens[start:start + n]):
                continue  # unknown words in a row are the <unk> share's to flag
            copies = 1
            while tuple(tokens[start + copies * n:start + (copies + 1) * n]) == tuple(tokens[start:start + n]):
                copies += 1
            best = max(best, copies)
    return best


def output_components(tgt_tokens: Sequence[str]) -> dict[str, float]:
    """``unk_share`` and ``repeats`` of the output tokens (a closing ``<eos>`` not counted); NaN for no tokens."""
    words = list(tgt_tokens[:-1] if tgt_tokens and tgt_tokens[-1] == "<eos>" else tgt_tokens)
    if not words:
        return {"unk_share": float("nan"), "repeats": float("nan")}
    return {"unk_share": sum(t == UNK for t in words) / len(words), "repeats": float(repeats(words))}


def span_components(cross: np.ndarray, src_tokens: Sequence[str], span: tuple[int, int]) -> dict[str, float]:
    """``attention_components`` of an LLM's rows over its prompt [T, S]: Attn-ign-SRC and Wass-to-Unif on the
    span's slice, each row renormalised over the span; sink mass on the whole prompt, as it is."""
    first, last = span
    inside = cross[:, first:last]
    mass = inside.sum(-1, keepdims=True)
    inside = np.divide(inside, mass, out=np.full_like(inside, 1.0 / max(last - first, 1)), where=mass > 0)
    return attention_components(inside, src_tokens[first:last]) | {
        "sink_mass": attention_components(cross, src_tokens)["sink_mass"]}


def component_values(logp: np.ndarray, cross: np.ndarray, src_tokens: Sequence[str],
                     alti_share: np.ndarray | None = None, tgt_tokens: Sequence[str] | None = None,
                     span: tuple[int, int] | None = None) -> dict[str, float]:
    """Every component from the log-probabilities of the T chosen tokens [T], one layer's head-averaged
    cross-attention [T, S], the ALTI+ source share per output token [T] (None: not computed, NaN), the T output
    tokens (None: ``unk_share`` and ``repeats`` NaN) and, for an LLM's prompt, the sentence's ``span`` [first,
    last) in it (``span_components``)."""
    out = {"seq_logprob": float(logp.sum()), "mean_logprob": float(logp.mean()) if logp.size else float("nan")}
    out |= attention_components(cross, src_tokens) if span is None else span_components(cross, src_tokens, span)
    out |= output_components(tgt_tokens) if tgt_tokens is not None else {"unk_share": float("nan"),
                                                                          "repeats": float("nan")}
    out["alti_source_share"] = float(np.mean(alti_share)) if alti_share is not None else float("nan")
    return {name: out[name] for name in COMPONENTS}


def components(translation: Translation, alti_share: np.ndarray | None = None, layer: int = -1) -> dict[str, float]:
    """Every component of one decoded translation (the cross-attention of ``layer``, heads averaged).
    InputError for a decode without cross-attention (a language model)."""
    if "cross" not in translation.attention:
        raise InputError("The suspect-translation score reads cross-attention, which a language model does not "
                         "have: load a translation model.")
    logp = np.log(np.clip(np.asarray(translation.probabilities, dtype=np.float64), 1e-300, None))
    cross = translation.attention["cross"][layer].astype(np.float64).mean(0)
    return component_values(logp, cross, translation.src_tokens, alti_share, translation.tokens,
                            prompt_span(translation.src_tokens, translation.roles))


def prompt_span(src_tokens: Sequence[str], roles: Sequence[str]) -> tuple[int, int] | None:
    """An LLM prompt's sentence span [first, last) from its tokens' roles; None for a source read alone."""
    return EncoderPass(tuple(src_tokens), None, roles=tuple(roles)).span if roles else None


def percentiles(values: np.ndarray) -> np.ndarray:
    """Average ranks scaled to 0..1 (ties share their mean rank; a single value is 0.5; NaN stays NaN)."""
    out = np.full(values.shape, np.nan)
    ok = np.isfinite(values)
    v = values[ok]
    if v.size == 0:
        return out
    order = np.argsort(v, kind="stable")
    ranks = np.empty(v.size)
    ranks[order] = np.arange(v.size)
    _, inverse = np.unique(v, return_inverse=True)
    sums = np.bincount(inverse, weights=ranks)
    ranks = sums[inverse] / np.bincount(inverse)[inverse]
    out[ok] = ranks / (v.size - 1) if v.size > 1 else 0.5
    return out
