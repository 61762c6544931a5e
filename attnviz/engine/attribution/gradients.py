"""Gradient attribution of every output token over the source tokens and the decoder inputs: saliency, gradient x
input and integrated gradients (Sundararajan et al. 2017), each optionally contrastive (Yin & Neubig 2022).

The attributed quantity of output token t is log p(chosen_t) (or p(chosen_t)), minus the same of the foil with a
contrast; its gradient is taken with respect to the token embeddings after the model's embedding scale and before
positions are added (``forced.GRADIENT_AT``). Per token, the D-dimensional vector is reduced to one value by the
aggregation said in the result: ``l2`` (its norm, >= 0) or ``sum`` (signed; gradient x input summed is the first-order
change of the quantity when that token's embedding is removed, and integrated gradients summed over every token
add up to f(input) - f(baseline)). Saliency is |gradient| reduced; gradient x input is gradient * embedding;
integrated gradients is (embedding - baseline) * the mean gradient along the straight path from the baseline,
integrated with Gauss-Legendre nodes; the completeness gap (how far their sum is from f(input) - f(baseline)) is
reported. Every output token's gradient comes from one row of a batch (each row reads its own position), and the
integration points of integrated gradients are rows too, so a sentence costs a few batched passes, not T x steps.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from attnviz.engine.attribution.base import (
    Attribution,
    AttributionEvent,
    AttributionMethod,
    AttributionProgress,
    AttributionSettings,
    register,
)
from attnviz.engine.attribution.forced import GRADIENT_AT, Forced, embedded, foil_id, forced_ids, quantity, scores
from attnviz.engine.errors import InputError
from attnviz.engine.models.protocol import SearchModel
from attnviz.engine.text.vocab import PAD_ID, UNK_ID

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

MAX_ROWS = 128  # rows of one batched pass: the sequences of one forward and backward
LOGIT_BUDGET = 8_000_000  # fewer rows for a large vocabulary: one pass holds rows x V log-probabilities
ACTIVATION_BUDGET = 400_000_000  # values a pass keeps for its backward: rows x tokens x layers x (8 D + 3 ff), about
# 1.6 GB in float32 (a Qwen2.5-0.5B-shaped LLM over a 100-token prompt keeps 60M a row: 52 rows took 18 GB)


def _chunk_rows(vocab: int, rows: int, per_row: int = 0) -> int:
    """Rows per pass: at most ``MAX_ROWS``, the logit budget and the activation budget (``per_row`` values a row keeps
    for the backward); at least 4 passes when there are enough rows, so that the early positions' passes read short
    prefixes (each pass decodes up to its last row's position: 14% less CPU time for integrated gradients on the
    bundled de-en model's 20-token sentence)."""
    kept = ACTIVATION_BUDGET // per_row if per_row else MAX_ROWS
    return max(1, min(MAX_ROWS, LOGIT_BUDGET // max(vocab, 1), kept, max(8, -(-rows // 4))))


def _kept_per_row(model: SearchModel, forced: Forced) -> int:
    """About the values one row's pass keeps for its backward: every token, every layer, 8 widths and 3 ff widths."""
    cfg = model.cfg
    tokens = forced.src.numel() + forced.tgt_in.numel()
    return tokens * (cfg.enc_layers + cfg.dec_layers) * (8 * cfg.d_model + 3 * cfg.ff_dim)


def aggregate(values: Tensor, how: str) -> Tensor:
    """[..., D] -> [...]: the L2 norm or the sum over the embedding dimension."""
    return values.norm(dim=-1) if how == "l2" else values.sum(-1)


def _path_gradients(model: SearchModel, forced: Forced, x: tuple[Tensor | None, Tensor],
                    base: tuple[Tensor | None, Tensor], nodes: np.ndarray, weights: np.ndarray, foil: int | None,
                    probability: bool, stop: threading.Event | None, phase: str, unit: str
                    ) -> Generator[AttributionProgress, None, tuple[Tensor | None, Tensor, Tensor] | None]:
    """The weighted sum over ``nodes`` (alphas) of the gradients at base + alpha (x - base), for every output
    token: source [T, S, D] (None without a source), prefix [T, T, D], and the quantity at each (t, alpha) [T, K].
    Yields progress per batched pass; returns None when stopped. The passes run at the model's precision; the
    gradients and the quantity are accumulated in float32 at least (float64 for a float64 model), a
    half-precision one's too."""
    (src_x, tgt_x), (src_b, tgt_b) = x, base
    acc = torch.promote_types(tgt_x.dtype, torch.float32)
    t_len, k = forced.tgt_out.numel(), len(nodes)
    rows = [(t, j) for t in range(t_len) for j in range(k)]
    g_src = None if src_x is None else torch.zeros(t_len, *src_x.shape, dtype=acc, device=tgt_x.device)
    g_tgt = torch.zeros(t_len, *tgt_x.shape, dtype=acc, device=tgt_x.device)
    values = torch.zeros(t_len, k, dtype=acc)
    size = _chunk_rows(model.cfg.tgt_vocab_size, len(rows), _kept_per_row(model, forced))
    for start in range(0, len(rows), size):
        chunk = rows[start:start + size]
        length = chunk[-1][0] + 1  # rows go by position: this pass reads the decoder inputs up to its last one
        pos = torch.tensor([t for t, _ in chunk], device=tgt_x.device)
        alpha = torch.tensor([nodes[j] for _, j in chunk], dtype=tgt_x.dtype, device=tgt_x.device)[:, None, None]
        weight = torch.tensor([weights[j] for _, j in chunk], dtype=acc, device=tgt_x.device)[:, None, None]
        tgt_in = (tgt_b[:length] + alpha * (tgt_x[:length] - tgt_b[:length])).requires_grad_(True)  # [B, t, D]
        src_in = None if src_x is None or src_b is None else (src_b + alpha * (src_x - src_b)).requires_grad_(True)
        with torch.enable_grad():
            f = scores(model, replace(forced, tgt_in=forced.tgt_in[:length]), src_in, tgt_in, pos, foil,
                       probability)  # [B]
            leaves = [tgt_in] if src_in is None else [tgt_in, src_in]
            grads = torch.autograd.grad(f.sum(), leaves)  # rows are independent: each row's own gradient
        g_tgt[:, :length].index_add_(0, pos, grads[0].to(acc) * weight)
        if g_src is not None:
            g_src.index_add_(0, pos, grads[1].to(acc) * weight)
        values[[t for t, _ in chunk], [j for _, j in chunk]] = f.detach().to(acc).cpu()
        yield AttributionProgress(min(start + size, len(rows)), len(rows), phase, unit)
        if stop is not None and stop.is_set():
            return None
    return g_src, g_tgt, values


def exact_inputs(model: SearchModel, x: tuple[Tensor | None, Tensor]) -> tuple[Tensor | None, Tensor]:
    """The embeddings a gradient method differentiates: float32 for a half-precision model that computes at its
    input's precision (its weights upcast as it goes, so bfloat16 storage keeps float32 gradients), else as given."""
    src, tgt = x
    if not model.computes_at_input_precision or tgt.dtype not in (torch.float16, torch.bfloat16):
        return x
    return (None if src is None else src.float()), tgt.float()


def _baseline(model: SearchModel, forced: Forced, x: tuple[Tensor | None, Tensor], name: str
              ) -> tuple[Tensor | None, Tensor]:
    """Integrated gradients' reference input: zero vectors, or every token replaced by <pad> or <unk>."""
    if name == "zero":
        return (None if x[0] is None else torch.zeros_like(x[0])), torch.zeros_like(x[1])
    token = PAD_ID if name == "pad" else UNK_ID
    filled = Forced(torch.full_like(forced.src, token), torch.full_like(forced.tgt_in, token), forced.tgt_out)
    return embedded(model, filled)


def _reading(translator: Translator, src_tokens, tokens, settings: AttributionSettings, default: str):
    """What every gradient method reads first: the ids, the foil's id, the aggregation and the settings to report."""
    forced = forced_ids(translator, src_tokens, tokens)
    foil = None if settings.foil is None else foil_id(translator, settings.foil)
    how = settings.aggregate or default
    probability = settings.target == "probability"
    reported = {"target": settings.target, "quantity": quantity(settings.foil, probability), "foil": settings.foil,
                "aggregate": how, "gradient_at": GRADIENT_AT}
    return forced, foil, how, probability, reported


def _foil_notes(tokens, forced: Forced, foil: int | None) -> tuple[str, ...]:
    if foil is None:
        return ()
    same = [f"{i + 1} ({tokens[i]})" for i in range(len(tokens)) if int(forced.tgt_out[i]) == foil]
    return (f"The foil is the chosen token at output step {', '.join(same)}: nothing to contrast there (all 0).",) \
        if same else ()


def _result(method, reported, src_tokens, tokens, maps: tuple[Tensor | None, Tensor], values: Tensor, notes,
            extras: dict[str, np.ndarray] | None = None) -> Attribution:
    src_map, tgt_map = maps
    t = len(tokens)
    source = np.zeros((1, t, len(src_tokens))) if src_map is None else src_map.double().cpu().numpy()[None]
    prefix = np.tril(tgt_map.double().cpu().numpy())[None]  # a decoder input after step t has no path to step t
    return Attribution(method, reported, tuple(src_tokens), tuple(tokens), source, prefix, notes=notes,
                       scores=values.double().cpu().numpy(), extras=extras or {})


def _local(name: str, default: str, times_input: bool):
    """Saliency (``times_input`` False) or gradient x input: the gradient at the input itself."""

    def compute(translator: Translator, src_tokens, tokens, settings, stop) -> Generator[AttributionEvent, None, None]:
        model = translator.model
        forced, foil, how, probability, reported = _reading(translator, src_tokens, tokens, settings, default)
        x = exact_inputs(model, embedded(model, forced))
        found = yield from _path_gradients(model, forced, x, x, np.ones(1), np.ones(1), foil, probability, stop,
                                           "gradients", "output tokens")
        if found is None:
            return
        g_src, g_tgt, values = found
        src_x, tgt_x = x
        if times_input:
            g_tgt = g_tgt * tgt_x
            g_src = None if g_src is None or src_x is None else g_src * src_x
        src_map = None if g_src is None else aggregate(g_src, how)
        tgt_map = aggregate(g_tgt, how)
        yield _result(name, reported, src_tokens, tokens, (src_map, tgt_map), values[:, 0],
                      _foil_notes(tokens, forced, foil))

    return compute


def path_nodes(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Alphas in (0, 1) and their weights (summing to 1) of the path integral: Gauss-Legendre nodes, exact for a
    smooth network to float precision at 64 steps; a ReLU network's kinks make any rule converge more slowly
    (measured on the bundled de-en model, 5 test sentences, 62 output tokens: a median gap of 1.3% at 32 steps, 0.75%
    at 64, 0.28% at 128; the worst token 50%, 26%, 12%; README), which the completeness note reports."""
    nodes, weights = np.polynomial.legendre.leggauss(steps)  # on [-1, 1]
    return (nodes + 1) / 2, weights / 2


def _completeness(src_sum: Tensor | None, tgt_sum: Tensor, delta: Tensor) -> tuple[np.ndarray, str]:
    """Sum of every token's attribution minus f(input) - f(baseline), per output token, and a note saying it."""
    total = tgt_sum.sum(-1) + (0 if src_sum is None else src_sum.sum(-1))  # [T]
    gap = (total - delta).double().cpu().numpy()
    scale = np.maximum(np.abs(delta.double().cpu().numpy()), 1e-12)
    worst = float(np.max(np.abs(gap) / scale))
    return gap, (f"Completeness: the attributions of each output token sum to f(input) - f(baseline) within "
                 f"{100 * worst:.2g}% (the largest relative gap over the output tokens).")


def _integrated(translator: Translator, src_tokens, tokens, settings, stop) -> Generator[AttributionEvent, None, None]:
    model = translator.model
    if settings.baseline == "pad" and translator.kind.reads_prompt:
        raise InputError("baseline pad is not defined for a model reading a prompt: its folder has no <pad> token "
                         "of its own and padding is left out of the prompt, so a prompt of <pad> is empty. Use "
                         "baseline unk (every token the folder's first token) or zero.")
    forced, foil, how, probability, reported = _reading(translator, src_tokens, tokens, settings, "sum")
    reported |= {"steps": settings.steps, "baseline": settings.baseline, "quadrature": "Gauss-Legendre"}
    x = exact_inputs(model, embedded(model, forced))
    base = exact_inputs(model, _baseline(model, forced, x, settings.baseline))
    nodes, weights = path_nodes(settings.steps)
    found = yield from _path_gradients(model, forced, x, base, nodes, weights, foil, probability,
                                       stop, "integrated gradients", "points (output tokens x steps)")
    if found is None:
        return
    g_src, g_tgt, _ = found
    f_base, f_input = (_ends(model, forced, x, base, alpha, foil, probability) for alpha in (0.0, 1.0))
    src_d = None if g_src is None or x[0] is None or base[0] is None else g_src * (x[0] - base[0])  # [T, S, D]
    tgt_d = g_tgt * (x[1] - base[1])  # [T, T, D]
    gap, note = _completeness(None if src_d is None else src_d.sum(-1), tgt_d.sum(-1), f_input - f_base)
    yield _result("integrated-gradients", reported, src_tokens, tokens,
                  (None if src_d is None else aggregate(src_d, how), aggregate(tgt_d, how)), f_input,
                  (note, *_foil_notes(tokens, forced, foil)),
                  {"completeness_gap": gap, "baseline_scores": f_base.double().cpu().numpy()})


@torch.no_grad()
def _ends(model: SearchModel, forced: Forced, x: tuple[Tensor | None, Tensor], base: tuple[Tensor | None, Tensor],
          alpha: float, foil: int | None, probability: bool) -> Tensor:
    """The quantity of every output token [T] at base + alpha (x - base): f(baseline) at 0, f(input) at 1."""
    t_len = forced.tgt_out.numel()
    (src_x, tgt_x), (src_b, tgt_b) = x, base
    src = None if src_x is None or src_b is None else (src_b + alpha * (src_x - src_b)).expand(t_len, -1, -1)
    tgt = (tgt_b + alpha * (tgt_x - tgt_b)).expand(t_len, -1, -1)  # [T, D] -> [T rows, T, D]
    return scores(model, forced, src, tgt, torch.arange(t_len, device=tgt.device), foil, probability)


GRADIENT_SETTINGS = ("aggregate", "target", "foil")

SALIENCY = register(AttributionMethod(
    "saliency", "Saliency", "How strongly each token's embedding moves the output token's log-probability: the "
    "gradient's L2 norm (or its sum).", False, _local("saliency", "l2", times_input=False),
    settings=GRADIENT_SETTINGS, default_aggregate="l2"))
GRADIENT_X_INPUT = register(AttributionMethod(
    "gradient-x-input", "Gradient x input", "Gradient times embedding, summed over the embedding (signed: to first "
    "order, how much the log-probability would drop if the token's embedding were zeroed) or its L2 norm.", False,
    _local("gradient-x-input", "sum", times_input=True), settings=GRADIENT_SETTINGS, default_aggregate="sum"))
INTEGRATED_GRADIENTS = register(AttributionMethod(
    "integrated-gradients", "Integrated gradients", "Gradient x (embedding - baseline) averaged along the path "
    "from the baseline; summed over every token it adds up to f(input) - f(baseline). The caption's completeness "
    "gap says how far the sum falls from it: on ReLU models 32 steps leave a median gap near 1% and a few tokens "
    "far more (their sizes do not add up); 64 steps bring nearly all under 5%, 128 most under 1%.", False,
    _integrated,
    settings=(*GRADIENT_SETTINGS, "steps", "baseline"), default_aggregate="sum"))
