"""Captured attention leaving the network for the events: CPU numpy arrays at the precision the model's kind keeps
them in (``ModelKind.capture_dtype``: float32, or float16 for an LLM, whose prompt maps are the largest), one step's
new query rows at a time; the whole maps are rebuilt from the rows when asked (``events.assemble``)."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from attnviz.engine.kinds import kind_of
from attnviz.engine.models.protocol import SearchModel


def capture_dtype(model: SearchModel) -> torch.dtype:
    return getattr(torch, kind_of(model.cfg).capture_dtype)


def on_host(values: Tensor | None, dtype: torch.dtype) -> np.ndarray | None:
    """``values`` as a numpy array of its own at ``dtype`` (None stays None)."""
    return None if values is None else values.to(dtype).cpu().numpy().copy()


def encoder_maps(attention: list[Tensor], dtype: torch.dtype) -> np.ndarray | None:
    """The first sentence's encoder (or prompt) self-attention [L, H, S, S] of per-layer [B, H, S, S] maps."""
    return on_host(torch.stack(attention, 1)[0], dtype) if attention else None
