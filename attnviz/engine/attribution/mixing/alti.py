"""ALTI (Ferrando et al. 2022, "Measuring the mixing of contextual information in the transformer") and ALTI+
(Ferrando et al. 2022, "Towards opening the black box of neural machine translation: source and target
contributions to the model's predictions"), on attnviz's Transformer networks (post-LN, pre-LN, MarianMT).

**One attention block.** Its output for query i is a sum of one vector per input token plus biases. The attention
part is sum_h alpha^h_ij W_O^h (W_V^h x_j + b_V^h) for key j (the value bias travels with its key; an off head's
term is multiplied by its gate); the residual adds x_i to the query's own term (self-attention). So the sum before
the LayerNorm is y~_i = sum_j T~_i(x_j) + b_O. Cross-attention's keys are encoder outputs, and the residual (the
decoder's own stream) is one more input, after the S source columns. Post-LN: LN(y~) = (y~ - mean(y~)) / sigma_i *
gamma + beta is linear in y~ once sigma_i = sqrt(var(y~_i) + eps) of the whole sum is fixed, so each term is taken
through L_i(z) = gamma * (z - mean(z)) / sigma_i, the biases b_O and beta staying unattributed; pre-LN: the
LayerNorm is on each key's own input (a function of x_j alone, part of T_i(x_j)) and y_i is the residual sum. Then,
with y_i the block's actual output,

    c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1) / sum_k max(0, ||y_i||_1 - ||y_i - T_i(x_k)||_1)

(the L1 distance and its "min_sum" normalisation as in the paper and its code). The feed-forward sublayer acts on
each position alone and is not a mixing step: it is left out, as in the paper.

**Rollout.** Encoder: R_enc = C_L ... C_1 (C_l already holds the residual, so nothing is added). Decoder (ALTI+):
each decoder position starts as its own input, R_0 = [0 | I_T] over the columns (S source tokens | T decoder
inputs). Layer l's self-attention block mixes the prefix, P = C^self_l R_(l-1); its cross-attention block gives
the share c^res_i to the decoder stream and c_ij to source token j, which brings its encoder rollout row:
R_l = c^res * P + [C^cross_l R_enc | 0]. Rows stay non-negative and sum to 1, so an output token's source share is
the sum of its source columns. A language model (no source) gets the decoder rollout alone. Names: B batch, H
heads, L layers, S source, T target, D model width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attnviz.engine.attribution.mixing.capture import Block, Capture


@dataclass
class Stacked:
    """The blocks of one kind, every layer stacked along the batch axis (N = L x B), so that one set of batched
    products serves every layer."""

    values: Tensor  # [N, Tk, D]
    weights: Tensor  # [N, H, Tq, Tk] as the blocks used them (an off head's are 0)
    w_out: Tensor  # [N, D, D] (out_features, in_features)
    b_out: Tensor  # [N, 1, D]
    x: Tensor  # [N, Tq, D]
    out: Tensor  # [N, Tq, D]
    gamma: Tensor  # [N, 1, D]
    beta: Tensor  # [N, 1, D]
    eps: float
    pre_norm: bool


def stack(blocks: list[Block]) -> Stacked:
    def each(get) -> Tensor:  # L x [B, ...] -> [L x B, ...]
        return torch.cat([get(b) for b in blocks])

    def per_layer(get) -> Tensor:  # L x [...] -> [L x B, ...]
        return torch.cat([get(b).expand(b.x.size(0), *get(b).shape) for b in blocks])

    def bias(b: Block) -> Tensor:
        return b.params.out_bias if b.params.out_bias is not None else b.x.new_zeros(b.x.size(-1))

    return Stacked(each(lambda b: b.values), each(lambda b: b.weights), per_layer(lambda b: b.params.out_weight),
                   per_layer(lambda b: bias(b)[None]), each(lambda b: b.x), each(lambda b: b.out),
                   per_layer(lambda b: b.params.norm_weight[None]), per_layer(lambda b: b.params.norm_bias[None]),
                   blocks[0].params.norm_eps, blocks[0].params.pre_norm)


@torch.inference_mode()
def block_terms(st: Stacked, self_attention: bool) -> tuple[Tensor, Tensor]:
    """T_i(x_j) [N, Tq, Tk(+1), D] (cross-attention: the residual as a last column) and the unattributed bias
    [N, Tq, D], such that their sum over j plus the bias is the block's output y."""
    n, tk, d = st.values.shape
    heads = st.weights.size(1)
    v = st.values.view(n, tk, heads, d // heads).transpose(1, 2)  # [N, Tk, D] -> [N, H, Tk, dh]
    f = v @ st.w_out.view(n, d, heads, d // heads).permute(0, 2, 3, 1)  # W_O^h f(x_j): [N, H, Tk, D]
    terms = (st.weights.permute(0, 3, 2, 1) @ f.transpose(1, 2)).transpose(1, 2)  # sum_h alpha f: [N, Tq, Tk, D]
    if self_attention:
        terms = terms + torch.diag_embed(st.x.transpose(1, 2)).permute(0, 2, 3, 1)  # x_i on the diagonal
    else:
        terms = torch.cat([terms, st.x[:, :, None]], dim=2)  # [N, Tq, Tk + 1, D]
    bias = st.b_out.expand_as(st.x)
    if st.pre_norm:
        return terms, bias
    total = terms.sum(2) + bias  # y~ [N, Tq, D], the sum the LayerNorm reads
    sigma = (total.var(-1, unbiased=False, keepdim=True) + st.eps).sqrt()  # [N, Tq, 1]

    def linear(z: Tensor, scale: Tensor, gamma: Tensor) -> Tensor:  # L_i(z) = gamma * (z - mean z) / sigma_i
        return gamma * (z - z.mean(-1, keepdim=True)) / scale

    return linear(terms, sigma[:, :, None], st.gamma[:, None]), linear(bias, sigma, st.gamma) + st.beta


def contributions(terms: Tensor, y: Tensor) -> Tensor:
    """c_ij [N, Tq, Tk] from the terms [N, Tq, Tk, D] and the output y [N, Tq, D] (the paper's normalisation)."""
    y_norm = y.abs().sum(-1, keepdim=True)  # [N, Tq, 1]
    c = (y_norm - (y[:, :, None] - terms).abs().sum(-1)).clamp(min=0)
    return c / c.sum(-1, keepdim=True).clamp(min=torch.finfo(c.dtype).tiny)


@torch.inference_mode()
def layer_contributions(cap: Capture) -> dict[str, Tensor]:
    """Each block's contributions, kind -> [L, B, Tq, Tk] (cross-attention: S source columns + the residual)."""
    out = {}
    for kind, blocks in cap.blocks.items():
        st = stack(blocks)
        c = contributions(block_terms(st, kind != "cross")[0], st.out)
        out[kind] = c.view(len(blocks), -1, *c.shape[1:])  # [L x B, Tq, Tk] -> [L, B, Tq, Tk]
    return out


def rollout(maps: np.ndarray) -> np.ndarray:
    """[L, N, N] per-layer contributions -> [L, N, N] rolled out after each layer (R_l = C_l R_(l-1))."""
    out, total = [], np.eye(maps.shape[-1])
    for layer in maps:
        total = layer @ total
        out.append(total)
    return np.stack(out)


def decoder_rollout(self_maps: np.ndarray, cross_maps: np.ndarray | None, enc_rollout: np.ndarray | None
                    ) -> np.ndarray:
    """[L, T, S + T] (source columns, then decoder inputs) after each decoder layer. ``self_maps`` [L, T, T] and
    ``cross_maps`` [L, T, S] are one layer's shares, which sum to 1 per row together (ALTI+: the self-attention
    contributions times the cross block's residual share); ``enc_rollout`` [S, S]. No source: cross is None."""
    lay, t = self_maps.shape[:2]
    s = 0 if cross_maps is None else cross_maps.shape[-1]
    total = np.concatenate([np.zeros((t, s)), np.eye(t)], axis=1)  # R_0 = [0 | I]
    out = []
    for layer in range(lay):
        total = self_maps[layer] @ total
        if cross_maps is not None and enc_rollout is not None:
            total[:, :s] += cross_maps[layer] @ enc_rollout
        out.append(total)
    return np.stack(out)


@dataclass(frozen=True)
class AltiMaps:
    """One sentence's ALTI: per-layer contributions and rollouts (numpy float64, batch index dropped)."""

    # encoder [L, S, S], decoder [L, T, T], cross [L, T, S + 1] (last: residual); a decoder-only LLM's "stream"
    # [L, N, N] over its prompt slots and decoder inputs (``mixing.stream``)
    layers: dict[str, np.ndarray]
    encoder_rollout: np.ndarray | None  # [L, S, S]
    total: np.ndarray  # [L, T, S + T] ALTI+ after each decoder layer: source columns, then decoder inputs

    @property
    def source_share(self) -> np.ndarray:
        """[T]: each output token's share from the source after the last layer (0 without a source)."""
        s = self.total.shape[-1] - self.total.shape[-2]
        return self.total[-1, :, :s].sum(-1)

    def span_share(self, span: tuple[int, int] | None) -> np.ndarray:
        """[T]: each output token's share from the source columns [first, last) after the last layer (an LLM
        prompt's sentence span); ``source_share`` when ``span`` is None."""
        return self.source_share if span is None else self.total[-1, :, span[0]:span[1]].sum(-1)


def alti_maps(cap: Capture, lengths: tuple[int, int] | None = None, index: int = 0,
              per: dict[str, np.ndarray] | None = None) -> AltiMaps:
    """ALTI of sentence ``index`` of a captured batch, cut to its ``lengths`` (S, T) (None: the whole batch width);
    ``per`` the batch's ``layer_contributions`` as numpy, when several sentences share them."""
    if per is None:
        per = {k: v.double().cpu().numpy() for k, v in layer_contributions(cap).items()}
    s, t = lengths if lengths is not None else (cap.mask.size(-1), cap.hidden.size(1))
    mine = {"decoder": per["decoder"][:, index, :t, :t]}
    if "encoder" in per:
        mine["encoder"] = per["encoder"][:, index, :s, :s]
    if "cross" in per:  # the residual is the last column, after the batch's (padded) source width
        mine["cross"] = np.concatenate([per["cross"][:, index, :t, :s], per["cross"][:, index, :t, -1:]], axis=-1)
    enc = rollout(mine["encoder"]) if "encoder" in mine else None
    cross = mine.get("cross")
    if cross is not None and enc is not None:
        total = decoder_rollout(mine["decoder"] * cross[:, :, -1:], cross[:, :, :-1], enc[-1])
    else:
        total = decoder_rollout(mine["decoder"], None, None)
    return AltiMaps(mine, enc, total)
