"""ALTI for decoder-only LLMs (Ferrando et al. 2023, "Explaining how transformers use context to build predictions":
ALTI extended to decoder-only layers), on ``engine.models.causal_lm``'s Llama-way and Gemma-way layers.

**One stream.** A decoder-only model reads the prompt and writes the output in one sequence, so the analysis runs
over one stream of N = W + T positions: the W prompt slots the prompt's pass reads (the shown prompt, every token
but its last), then the T decoder inputs. The first decoder input is the prompt's last token (fed where an
encoder-decoder feeds ``<sos>``): it is a stream position like any other, and its share is the prefix's first
column (labelled ``<sos>``), as the gradient methods count it. A teacher-forced pass records, per layer, the
prompt's pass (probe points ``enc.{l}.*``) and the output steps' (``dec.{l}.*``) and joins them: the stream
entering the layer x, the value vectors of the G key/value heads at every position, the weights of the H query
heads [N, N] (the prompt's rows over the prompt's columns; the output's rows over the prompt and the output so far,
one softmax), and the residual sum leaving the attention block.

**One block.** Layer l's attention block maps the stream x to y_i = x_i + P(a_i), with
a_i = sum_j sum_h alpha^h_ij W_O^h v^g(h)_j + b_O, where v^g_j = W_V^g RMSNorm(x_j) + b_V^g is key/value head g's
value of position j (query head h reads group g(h) = h // (H / G): grouped-query attention; the value bias
travels with its key; the pre-attention RMSNorm is a function of x_j alone, so it is part of j's term, as a pre-LN
LayerNorm is), W_O^h is head h's slice of the output projection and b_O its bias (unattributed). q/k norms, RoPE,
softcaps, sliding windows and the causal mask act through alpha alone (a key outside the window or in the future has
alpha = 0, so its term is 0). P is the identity in a Llama-way layer; in a Gemma-way layer it is the post-attention
RMSNorm, P(a) = g * a / rms(a) with rms(a) = sqrt(mean(a^2) + eps): once rms(a_i) of the whole sum is fixed it is
linear, exactly as the post-LN case handles LayerNorm (rms instead of sigma, no mean taken off), so each term is
taken through z -> g * z / rms(a_i). So y_i = sum_j T_i(x_j) + b_i with T_i(x_j) = P_i(sum_h alpha^h_ij W_O^h
v^g(h)_j) + [i = j] x_i and b_i = P_i(b_O), and the contributions are ALTI's (``alti.contributions``): c_ij =
max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows divided by their sum. The feed-forward sublayer acts on each
position alone and is left out, as in both papers.

**Rollout.** R = C_L ... C_1 over the whole stream (each C_l holds the residual already). Rows are non-negative and
sum to 1, and a row never reaches a later position, a padding slot or a key outside its windows. An output token's
row (stream position W + t) maps to ``Attribution.source`` (its first S = W prompt columns) and ``prefix`` (the T
decoder-input columns). ALTI-Logit (the 2023 paper's projection of each contribution onto the logit) is not computed:
this is ALTI's mixing share, whose rows sum to 1. Names: B batch, H query heads, G key/value heads, L layers, N
stream positions, W prompt slots, T decoder inputs, D width, dh head width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from attnviz.engine.attribution.mixing.alti import AltiMaps, contributions, rollout
from attnviz.engine.models.llm_layers import GroupedBlock
from attnviz.engine.models.probes import Captured, attention_point, head_scales, layer_point
from attnviz.engine.models.probes import capture as probe_capture

SIDES = ("encoder", "decoder")  # the prompt's pass, then the output steps'
CHUNK_BYTES = 256 * 2 ** 20  # what one chunk of a block's decomposition may take (``row_chunks``)


@dataclass
class StreamBlock:
    """One layer's attention block over the whole stream, as the pass saw it."""

    params: GroupedBlock
    x: Tensor  # [B, N, D] the stream entering the layer
    values: Tensor  # [B, G, N, dh]
    weights: Tensor  # [B, H, N, N] as they act (an off head's are 0, a rescaled head's times its factor)
    out: Tensor  # [B, N, D] the residual sum after the block


@dataclass
class StreamCapture:
    model: Any  # the ``CausalLM`` the pass ran (value zeroing runs the rest of its layers)
    width: int  # W prompt slots before the decoder inputs
    hidden: Tensor  # [B, T, D] the decoder inputs' final hidden states (what ``project`` reads)
    blocks: list[StreamBlock]  # one per layer

    @property
    def cross(self) -> Tensor:
        """[B, H, T, W]: the last layer's output rows over the prompt (the LLM's "cross-attention")."""
        return self.blocks[-1].weights[:, :, self.width:, :self.width]


def _names(layers: int) -> list[str]:
    return [name for layer in range(layers) for side in SIDES
            for name in (layer_point(side, layer, "in"), *(attention_point(side, layer, p)
                                                          for p in ("v", "weights", "resid")))]


def _weights(model, seen: Captured, side: str, layer: int) -> Tensor:
    weights = seen[attention_point(side, layer, "weights")]
    scales = head_scales(model, attention_point(side, layer, "heads"))
    return weights if scales is None else weights * scales.to(weights.dtype)[:, None, None]


def _block(model, seen: Captured, layer: int) -> StreamBlock:
    def both(point: str, dim: int) -> Tensor:
        return torch.cat([seen[attention_point(side, layer, point)] for side in SIDES], dim)

    prompt, steps = _weights(model, seen, "encoder", layer), _weights(model, seen, "decoder", layer)
    weights = torch.cat([F.pad(prompt, (0, steps.size(2))), steps.to(prompt.dtype)], 2)  # [B, H, W + T, W + T]
    x = torch.cat([seen[layer_point(side, layer, "in")] for side in SIDES], 1)
    return StreamBlock(model.grouped_block(layer), x, both("v", 2), weights, both("resid", 1))


@torch.inference_mode()
def capture_stream(model, src: Tensor, tgt_in: Tensor) -> StreamCapture:
    """The teacher-forced pass over the prompt ``src`` [B, S + 1] (attnviz ids, its last token the first decoder
    input) and the decoder inputs ``tgt_in`` [B, T], every layer's block recorded over the stream."""
    model.eval()
    layers = model.cfg.dec_layers
    with probe_capture(model, _names(layers)) as seen:
        dec = model.decode(tgt_in, model.encode(src))
    width = seen[layer_point("encoder", 0, "in")].size(1)
    return StreamCapture(model, width, dec.hidden, [_block(model, seen, layer) for layer in range(layers)])


@torch.inference_mode()
def attention_terms(block: StreamBlock, rows: slice = slice(None)) -> tuple[Tensor, Tensor]:
    """The attention block's output before the residual (and before a post-norm), split: A_ij = sum_h alpha^h_ij
    W_O^h v^g(h)_j [B, R, N, D] for the query ``rows`` R, and b_O [B, R, D] (float32, float64 for a float64
    model)."""
    p = block.params
    dtype = torch.float64 if block.x.dtype == torch.float64 else torch.float32
    heads, groups = p.heads, p.kv_heads
    v = block.values.to(dtype).repeat_interleave(heads // groups, dim=1)  # [B, G, N, dh] -> [B, H, N, dh]
    w_out = p.out_weight.to(dtype).view(p.out_weight.size(0), heads, -1)  # [D, H, dh]
    f = torch.einsum("bhnk,dhk->bhnd", v, w_out)  # W_O^h v_j: [B, H, N, D]
    terms = torch.einsum("bhij,bhjd->bijd", block.weights[:, :, rows].to(dtype), f)  # [B, R, N, D]
    b, r = terms.shape[:2]
    bias = p.out_bias.to(dtype) if p.out_bias is not None else terms.new_zeros(terms.size(-1))
    return terms, bias.expand(b, r, -1)


@torch.inference_mode()
def block_terms(block: StreamBlock, rows: slice = slice(None)) -> tuple[Tensor, Tensor]:
    """T_i(x_j) [B, R, N, D] for the query ``rows`` R and the unattributed bias b_i [B, R, D] (float32, float64 for
    a float64 model), whose sum over j plus the bias is the block's output y (the module docstring's
    decomposition)."""
    p = block.params
    terms, bias = attention_terms(block, rows)
    if p.post_gain is not None:  # Gemma: P_i(z) = g * z / rms(a_i), linear once rms of the whole sum is fixed
        total = terms.sum(2) + bias  # a_i, what the post-attention norm reads
        scale = p.post_gain.to(terms.dtype) / (total.pow(2).mean(-1, keepdim=True) + p.post_eps).sqrt()  # [B, R, D]
        terms, bias = terms * scale[:, :, None], bias * scale
    mine = torch.arange(terms.size(2), device=terms.device)[rows]  # each query row's own stream position
    terms[:, torch.arange(mine.numel(), device=terms.device), mine] += block.x[:, mine].to(terms.dtype)  # residual
    return terms, bias


def row_chunks(n: int, width: int, budget: int | None = None) -> list[slice]:
    """Query rows in chunks whose terms [R, N, D] (float32, twice: the terms and y minus them) stay in ``budget``
    bytes (None: ``CHUNK_BYTES``): a long prompt's block is decomposed a few rows at a time."""
    size = max(1, (budget or CHUNK_BYTES) // (2 * 4 * n * width))
    return [slice(start, min(start + size, n)) for start in range(0, n, size)]


@torch.inference_mode()
def stream_contributions(cap: StreamCapture) -> np.ndarray:
    """Each layer's contributions [L, B, N, N] (numpy float64), rows summing to 1, computed a chunk of query rows
    at a time (``row_chunks``)."""
    out = []
    for block in cap.blocks:
        b, n, d = block.x.shape
        parts = []
        for rows in row_chunks(n, b * d):
            terms, _ = block_terms(block, rows)
            parts.append(contributions(terms, block.out[:, rows].to(terms.dtype)).double().cpu().numpy())
        out.append(np.concatenate(parts, 1))
    return np.stack(out)


def cut(maps: np.ndarray, width: int, lengths: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Stream maps [L, N, N] -> the T output rows over the S prompt columns [L, T, S] and the T decoder inputs'
    [L, T, T]."""
    s, t = lengths
    rows = maps[:, width:width + t]
    return np.ascontiguousarray(rows[..., :s]), np.ascontiguousarray(rows[..., width:width + t])


def stream_alti(cap: StreamCapture, lengths: tuple[int, int] | None = None, index: int = 0,
                per: np.ndarray | None = None) -> AltiMaps:
    """ALTI of sentence ``index`` of a captured batch over its S shown prompt tokens and T decoder inputs
    (``lengths``; None: the whole batch width), ``per`` the batch's ``stream_contributions`` when several
    sentences share them. ``layers["stream"]`` holds the per-layer contributions [L, N, N]; ``total`` the rollout's
    output rows [L, T, S + T]."""
    if per is None:
        per = stream_contributions(cap)
    mine = per[:, index]
    if lengths is None:
        lengths = (cap.width, cap.hidden.size(1))
    source, prefix = cut(rollout(mine), cap.width, lengths)
    return AltiMaps({"stream": mine}, None, np.concatenate([source, prefix], -1))
