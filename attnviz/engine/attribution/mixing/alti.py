"""ALTI (Ferrando et al. 2022, "Measuring the mixing of contextual information in the transformer"), ALTI+
(Ferrando et al. 2022, "Towards opening the black box of neural machine translation: source and target
contributions to the model's predictions") and decoder-only ALTI (Ferrando et al. 2023, "Explaining how transformers
use context to build predictions"), on every Transformer network attnviz runs: post-LN, pre-LN, MarianMT, and the
Llama-way and Gemma-way LLM layers. One decomposition serves them all.

**One attention block.** Its output for query i is a sum of one vector per key plus biases. The attention part is
a_i = sum_j sum_h alpha^h_ij W_O^h v^g(h)_j + b_O, where v^g_j is key/value head g's value of key j (query head h
reads group g(h) = h // (H / G): grouped-query attention; G = H without groups), W_O^h is head h's slice of the
output projection and b_O its bias (unattributed). The value bias travels with its key; a pre-norm (LayerNorm or
RMSNorm before the block) is a function of x_j alone, so it is part of j's term; an off head's term is multiplied by
its gate; q/k norms, RoPE, softcaps, sliding windows and the causal mask act through alpha alone (alpha = 0: no
term). The residual adds x_i to the query's own term (self-attention) or is one more input after the keys
(cross-attention, whose keys are encoder outputs). A norm after the block (``AttentionBlock.norm_reads``) is linear
once the scale of its whole input is fixed, so each term is taken through N_i(z) = gain * (z - mean z) / s_i
(LayerNorm; RMSNorm takes no mean), s_i computed from the whole sum, its bias unattributed: post-LN reads the
residual sum, LN(x + a); Gemma's post-attention RMSNorm reads the block's output, x + N(a). With y_i the block's
actual output,

    c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1) / sum_k max(0, ||y_i||_1 - ||y_i - T_i(x_k)||_1)

(the L1 distance and its "min_sum" normalisation as in the papers and their code). The feed-forward sublayer acts on
each position alone and is not a mixing step: it is left out, as in the papers.

**Rollout.** Encoder: R_enc = C_L ... C_1 (C_l already holds the residual). Decoder (ALTI+): each decoder position
starts as its own input, R_0 = [0 | I_T] over the columns (S source tokens | T decoder inputs); layer l's
self-attention mixes the prefix, P = C^self_l R_(l-1); its cross-attention gives the share c^res_i to the decoder
stream and c_ij to source token j, which brings its encoder rollout row: R_l = c^res * P + [C^cross_l R_enc | 0].
One stream (a decoder-only LLM, ``capture``): R = C_L ... C_1 over the whole stream, and an output token's row
(stream position W + t) gives its prompt columns and its decoder-input columns. Rows stay non-negative and sum to
1, so an output token's source share is the sum of its source columns. A language model (no source) gets the
decoder rollout alone. ALTI-Logit (the 2023 paper's projection onto the logit) is not computed: these are mixing
shares. Names: B batch, H query heads, G key/value heads, L layers, S source, T target, N stream positions, W
prompt slots, R query rows, D model width, dh head width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attnviz.engine.attribution.mixing.capture import STREAM, Block, Capture
from attnviz.engine.models.protocol import BlockNorm

CHUNK_BYTES = 256 * 2 ** 20  # what one chunk of a block's decomposition may take (``row_chunks``)


def _dtype(block: Block) -> torch.dtype:
    return torch.float64 if block.x.dtype == torch.float64 else torch.float32


@torch.inference_mode()
def attention_terms(block: Block, rows: slice = slice(None)) -> tuple[Tensor, Tensor]:
    """The attention block's output before the residual and any norm, split by key: A_ij = sum_h alpha^h_ij W_O^h
    v^g(h)_j [B, R, Tk, D] for the query ``rows`` R, and b_O [B, R, D] (float32, float64 for a float64 model)."""
    p, dtype = block.params, _dtype(block)
    v = block.values.to(dtype).repeat_interleave(p.heads // p.kv_heads, dim=1)  # [B, G, Tk, dh] -> [B, H, Tk, dh]
    w_out = p.out_weight.to(dtype).view(p.out_weight.size(0), p.heads, -1)  # [D, H, dh]
    f = torch.einsum("bhnk,dhk->bhnd", v, w_out)  # W_O^h v_j: [B, H, Tk, D]
    terms = torch.einsum("bhij,bhjd->bijd", block.weights[:, :, rows].to(dtype), f)  # [B, R, Tk, D]
    b, r = terms.shape[:2]
    bias = p.out_bias.to(dtype) if p.out_bias is not None else terms.new_zeros(terms.size(-1))
    return terms, bias.expand(b, r, -1)


def _through_norm(norm: BlockNorm, terms: Tensor, bias: Tensor) -> tuple[Tensor, Tensor]:
    """Terms [B, R, K, D] and bias [B, R, D] taken through ``norm`` of their sum, its scale fixed by the whole sum:
    N_i(z) = gain * (z - mean z) / s_i (RMSNorm: no mean), the norm's own bias added to the unattributed part."""
    total = terms.sum(2) + bias  # what the norm reads [B, R, D]
    gain = norm.gain.to(terms.dtype)
    if norm.centred:
        scale = (total.var(-1, unbiased=False, keepdim=True) + norm.eps).sqrt()  # [B, R, 1]
        terms, bias = terms - terms.mean(-1, keepdim=True), bias - bias.mean(-1, keepdim=True)
    else:
        scale = (total.pow(2).mean(-1, keepdim=True) + norm.eps).sqrt()
    terms, bias = gain * terms / scale[:, :, None], gain * bias / scale
    return terms, bias if norm.bias is None else bias + norm.bias.to(terms.dtype)


@torch.inference_mode()
def block_terms(block: Block, rows: slice = slice(None)) -> tuple[Tensor, Tensor]:
    """T_i(x_j) [B, R, Tk, D] (cross-attention: [B, R, Tk + 1, D], the residual as a last column) for the query
    ``rows`` R, and the unattributed bias b_i [B, R, D], whose sum over j plus the bias is the block's output y (the
    module docstring's decomposition)."""
    p = block.params
    terms, bias = attention_terms(block, rows)
    if p.norm is not None and p.norm_reads == "block":  # Gemma: x + N(a)
        terms, bias = _through_norm(p.norm, terms, bias)
    x = block.x[:, rows].to(terms.dtype)  # [B, R, D] each query's residual
    if block.self_attention:
        mine = torch.arange(block.x.size(1), device=terms.device)[rows]  # each query row's own key
        terms[:, torch.arange(mine.numel(), device=terms.device), mine] += x
    else:
        terms = torch.cat([terms, x[:, :, None]], dim=2)
    if p.norm is not None and p.norm_reads == "sum":  # post-LN: LN(x + a)
        terms, bias = _through_norm(p.norm, terms, bias)
    return terms, bias


def contributions(terms: Tensor, y: Tensor) -> Tensor:
    """c_ij [B, R, K] from the terms [B, R, K, D] and the output y [B, R, D] (the paper's normalisation)."""
    y_norm = y.abs().sum(-1, keepdim=True)  # [B, R, 1]
    c = (y_norm - (y[:, :, None] - terms).abs().sum(-1)).clamp(min=0)
    return c / c.sum(-1, keepdim=True).clamp(min=torch.finfo(c.dtype).tiny)


def row_chunks(rows: int, per_row: int, budget: int | None = None) -> list[slice]:
    """Query rows in chunks whose terms (``per_row`` floats a row, twice: the terms and y minus them) stay in
    ``budget`` bytes (None: ``CHUNK_BYTES``): a long prompt's block is decomposed a few rows at a time."""
    size = max(1, (budget or CHUNK_BYTES) // (2 * 4 * per_row))
    return [slice(start, min(start + size, rows)) for start in range(0, rows, size)]


@torch.inference_mode()
def block_contributions(block: Block) -> Tensor:
    """The block's contributions [B, Tq, K] (cross-attention: the residual as a last column), rows summing to 1,
    a chunk of query rows at a time (``row_chunks``)."""
    b, tq, d = block.x.shape
    keys = block.weights.size(-1) + (not block.self_attention)
    parts = []
    for rows in row_chunks(tq, b * keys * d):
        terms, _ = block_terms(block, rows)
        parts.append(contributions(terms, block.out[:, rows].to(terms.dtype)))
    return torch.cat(parts, 1)


@torch.inference_mode()
def layer_contributions(cap: Capture) -> dict[str, np.ndarray]:
    """Each block's contributions, kind -> [L, B, Tq, K] (numpy float64; cross-attention: S source columns + the
    residual; a one-stream capture's ``stream`` blocks: [L, B, N, N])."""
    return {kind: torch.stack([block_contributions(b) for b in blocks]).double().cpu().numpy()
            for kind, blocks in cap.blocks.items()}


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


def stream_rows(maps: np.ndarray, width: int, lengths: tuple[int, int]) -> np.ndarray:
    """One-stream maps [L, N, N] -> the T output rows over the S shown prompt columns, then the T decoder inputs'
    [L, T, S + T]."""
    s, t = lengths
    rows = maps[:, width:width + t]
    return np.concatenate([rows[..., :s], rows[..., width:width + t]], -1)


@dataclass(frozen=True)
class AltiMaps:
    """One sentence's ALTI: per-layer contributions and rollouts (numpy float64, batch index dropped)."""

    # encoder [L, S, S], decoder [L, T, T], cross [L, T, S + 1] (last: residual); a one-stream capture's "stream"
    # [L, N, N] over its prompt slots and decoder inputs
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
    """ALTI of sentence ``index`` of a captured batch, cut to its ``lengths`` (S, T) (None: the whole batch width;
    a one-stream capture's S is its shown prompt); ``per`` the batch's ``layer_contributions``, when several
    sentences share them."""
    if per is None:
        per = layer_contributions(cap)
    if STREAM in per:
        mine = per[STREAM][:, index]
        shown = lengths if lengths is not None else (cap.width, cap.hidden.size(1))
        return AltiMaps({STREAM: mine}, None, stream_rows(rollout(mine), cap.width, shown))
    s, t = lengths if lengths is not None else (cap.mask.size(-1), cap.hidden.size(1))
    maps = {"decoder": per["decoder"][:, index, :t, :t]}
    if "encoder" in per:
        maps["encoder"] = per["encoder"][:, index, :s, :s]
    if "cross" in per:  # the residual is the last column, after the batch's (padded) source width
        maps["cross"] = np.concatenate([per["cross"][:, index, :t, :s], per["cross"][:, index, :t, -1:]], axis=-1)
    enc = rollout(maps["encoder"]) if "encoder" in maps else None
    cross = maps.get("cross")
    if cross is not None and enc is not None:
        total = decoder_rollout(maps["decoder"] * cross[:, :, -1:], cross[:, :, :-1], enc[-1])
    else:
        total = decoder_rollout(maps["decoder"], None, None)
    return AltiMaps(maps, enc, total)
