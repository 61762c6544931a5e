"""Contribution-corrected attention: norm-weighted attention (Kobayashi et al. 2020) and attention rollout (Abnar &
Zuidema 2020), beside the raw weights.

Norm-weighted: a head's output at query i is sum_j alpha_ij f(x_j) + (the output bias, shared by every key and
left out), with f(x) = (x W_V + b_V) W_O restricted to the head's slice of W_V's outputs and W_O's inputs; the view
shows ||alpha_ij f(x_j)||, divided by its row sum so that each row sums to 1 (the paper shows the raw norms; the
normalisation makes heads comparable on the 0..1 colour scale and is stated in the view). The value vectors are
read at each block's ``v`` probe point (``engine.models.probes``) and W_O is the network's ``attention_block``, so
only networks that offer both have it (``norm_weighted_why``).

Rollout: head-averaged encoder self-attention multiplied through the layers, R_l = A_l R_(l-1), either raw or with
the residual connection modelled as 0.5 A + 0.5 I (rows renormalised); for cross-attention each decoder layer's
head-averaged weights are composed with the final encoder rollout, C_l R_enc. Products of row-stochastic matrices,
so every row sums to 1. Names: B batch, L layers, H heads, S source, T target, D model width, dh = D / H.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from attnviz.engine.analysis.corpus import forward_batch
from attnviz.engine.analysis.names import VIEWS  # noqa: F401 (the views' names, re-exported)
from attnviz.engine.kinds import kind_of
from attnviz.engine.models.probes import attention_point, capture
from attnviz.engine.models.protocol import SearchModel

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator


def head_value_vectors(values: Tensor, out_weight: Tensor, heads: int) -> Tensor:
    """f_h(x_j) for every head and key: values [B, Tk, D] (x W_V + b_V), out_weight [D, D] -> [B, H, Tk, D]."""
    b, t, d = values.shape
    v = values.view(b, t, heads, d // heads)  # [B, Tk, D] -> [B, Tk, H, dh]
    w = out_weight.view(d, heads, d // heads)  # [D_out, D_in] -> [D_out, H, dh]
    return torch.einsum("bthk,ohk->bhto", v, w)


def norm_weighted(weights: Tensor, values: Tensor, out_weight: Tensor, normalize: bool = True) -> Tensor:
    """||alpha_ij f_h(x_j)|| for weights [B, H, Tq, Tk]; rows renormalised to sum to 1 unless ``normalize`` is False."""
    norms = head_value_vectors(values, out_weight, weights.size(1)).norm(dim=-1)  # [B, H, Tk]
    out = weights * norms[:, :, None, :]
    return out / out.sum(-1, keepdim=True).clamp(min=1e-12) if normalize else out


def norm_weighted_why(translator: Translator) -> str | None:
    """Why ``translator``'s network has no norm-weighted view (None where it has): it needs each block's value
    vectors and output projection, one block per attention kind shown."""
    model = translator.model
    missing = model.offers("attention_block", "*.*.*.v", "*.*.*.weights")
    if missing is not None:
        return f"{missing}, which norm-weighting reads"
    if model.one_stream:
        return ("its views (the prompt, the output, the output over the prompt) are parts of one attention block, "
                "which norm-weighting does not split")
    return None


@torch.inference_mode()
def norm_weighted_pass(model: SearchModel, src: Tensor, tgt_in: Tensor) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A teacher-forced pass over one sentence ([1, S], [1, T]): kind -> (raw, norm-weighted), each [L, H, Tq, Tk].
    The weights and value vectors are read at the network's probe points, each block's output projection from the
    network (``attention_block``)."""
    layers = {kind: n for kind, (n, _) in kind_of(model.cfg).layout(model.cfg).items()}
    points = [attention_point(kind, layer, what) for kind, n in layers.items() for layer in range(n)
              for what in ("v", "weights")]
    with capture(model, points) as seen:
        model.decode(tgt_in, model.encode(src))
    out = {}
    for kind, n in layers.items():
        raw = [seen[attention_point(kind, layer, "weights")].float() for layer in range(n)]  # L x [1, H, Tq, Tk]
        values = [seen[attention_point(kind, layer, "v")].float().transpose(1, 2).flatten(2)  # [1, Tk, D]
                  for layer in range(n)]
        norm = [norm_weighted(w, v, model.attention_block(kind, layer).out_weight.float())
                for layer, (w, v) in enumerate(zip(raw, values))]
        out[kind] = (torch.cat(raw).numpy(), torch.cat(norm).numpy())  # L x [1, H, Tq, Tk] -> [L, H, Tq, Tk]
    return out


def rollout(attention: np.ndarray, residual: bool) -> np.ndarray:
    """Encoder self-attention [L, H, S, S] -> rollout after each layer [L, S, S] (heads averaged)."""
    a = attention.mean(1)  # [L, S, S]
    if residual:
        a = 0.5 * a + 0.5 * np.eye(a.shape[-1])
        a = a / a.sum(-1, keepdims=True)
    out, total = [], np.eye(a.shape[-1])
    for layer in a:
        total = layer @ total
        out.append(total)
    return np.stack(out)


def cross_rollout(cross: np.ndarray, encoder: np.ndarray, residual: bool) -> np.ndarray:
    """Cross-attention [L, H, T, S] composed with the encoder's final rollout: [L, T, S] (heads averaged)."""
    return cross.mean(1) @ rollout(encoder, residual)[-1]


def sentence_views(translator: Translator, src_tokens: Sequence[str], decoder_inputs: Sequence[str]
                   ) -> dict[str, dict[str, np.ndarray]]:
    """Every view of one translated sentence: view (``VIEWS``) -> kind -> [L, H, Tq, Tk] (rollouts repeat their
    head-averaged map for every head so the views share one shape). Views a model cannot give are left out."""
    model = translator.model
    src = torch.tensor([translator.src_vocab.encode(src_tokens)]) if translator.has_source else \
        torch.zeros(1, 0, dtype=torch.long)
    tgt_in = torch.tensor([translator.tgt_vocab.encode(decoder_inputs)])
    if norm_weighted_why(translator) is None:
        passes = norm_weighted_pass(model, src, tgt_in)
        views = {"raw": {k: r for k, (r, _) in passes.items()}, "norm": {k: n for k, (_, n) in passes.items()}}
    else:
        kinds = translator.kind.attention_kinds
        views = {"raw": {k: v[0].numpy() for k, v in forward_batch(model, src, tgt_in, kinds).items()}}
    raw = views["raw"]
    if "encoder" in raw:
        for name, residual in (("rollout", False), ("rollout-residual", True)):
            views[name] = {"encoder": _per_head(rollout(raw["encoder"], residual), raw["encoder"].shape[1])}
            if "cross" in raw:
                views[name]["cross"] = _per_head(cross_rollout(raw["cross"], raw["encoder"], residual),
                                                 raw["cross"].shape[1])
    return views


def _per_head(maps: np.ndarray, heads: int) -> np.ndarray:
    return np.repeat(maps[:, None], heads, axis=1)  # [L, Tq, Tk] -> [L, H, Tq, Tk]
