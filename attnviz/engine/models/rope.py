"""Rotary position embeddings (RoPE) as the Llama and Gemma families compute them: the inverse frequencies of
``default``, ``linear`` and Llama 3's ``llama3`` scaling (which changes the frequency of every low- and mid-frequency
pair, so every position's rotation), the cos/sin of any positions, and their application to queries and keys with
the rotate-half pairing (dimension i with i + head_dim / 2), all in float32 as transformers computes them.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attnviz.engine.models.llm_arch import LLMArch


def inverse_frequencies(arch: LLMArch, local: bool = False) -> Tensor:
    """[head_dim / 2] float32: the angle per position of each rotated pair; ``local``: a Gemma 3 sliding layer's
    (its own base, never scaled)."""
    dim = arch.head_dim
    base = arch.rope_local_theta if local and arch.rope_local_theta else arch.rope_theta
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if local or arch.rope_type == "default":
        return inv
    if arch.rope_type == "linear":
        return inv / arch.rope_factor
    return _llama3(inv, arch)


def _llama3(inv: Tensor, arch: LLMArch) -> Tensor:
    """Llama 3.1's scaling: long wavelengths divided by ``factor``, short ones kept, the band between blended."""
    old = arch.rope_original_positions
    low_wavelen, high_wavelen = old / arch.rope_low_freq, old / arch.rope_high_freq
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / arch.rope_factor, inv)
    smooth = (old / wavelen - arch.rope_low_freq) / (arch.rope_high_freq - arch.rope_low_freq)
    blended = (1 - smooth) * scaled / arch.rope_factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, blended, scaled)


def rotations(inv: Tensor, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """cos and sin [B, 1, T, head_dim] of ``positions`` [B, T], at ``dtype``."""
    freqs = positions[..., None].float() * inv.to(positions.device)  # [B, T, dh / 2]
    angles = torch.cat((freqs, freqs), dim=-1)[:, None]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """``x`` [B, heads, T, dh] rotated: x cos + rotate_half(x) sin."""
    half = x.size(-1) // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + turned * sin
