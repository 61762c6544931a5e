"""Where and how fast training steps: the device a run uses and the learning-rate schedules (constant, noam,
inverse square root, one-cycle), each a pure function of the step."""

from __future__ import annotations

import math

import torch

from attnviz.engine.config import TrainConfig
from attnviz.engine.errors import ConfigError


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device is 'cuda' but no CUDA GPU is available; set it to 'cpu' or 'auto'",
                          settings=("device",))
    return torch.device(name)


def learning_rate(step: int, cfg: TrainConfig, d_model: int, total_steps: int = 0) -> float:
    """The rate for optimizer step ``step`` (1-based); ``one_cycle`` needs the run's ``total_steps``."""
    step = max(step, 1)
    if cfg.schedule == "noam":
        return cfg.lr * d_model ** -0.5 * min(step ** -0.5, step * cfg.warmup ** -1.5)
    if cfg.schedule == "inverse_sqrt":
        return cfg.lr * min(step / cfg.warmup, math.sqrt(cfg.warmup / step))
    if cfg.schedule == "one_cycle":
        return _one_cycle(step, max(total_steps, step), cfg.lr)
    return cfg.lr


def _one_cycle(step: int, total: int, peak: float, rise: float = 0.3) -> float:
    """torch's OneCycleLR (cosine annealing): peak/25 -> peak over ``rise`` of the run, then -> peak/25e4."""
    start, end = peak / 25, peak / 25 / 1e4
    top = max(rise * total - 1, 1)
    if step - 1 <= top:
        frac, low, high = (step - 1) / top, start, peak
    else:
        frac, low, high = (step - 1 - top) / max(total - 1 - top, 1), peak, end
    return high + (low - high) * (1 + math.cos(math.pi * min(frac, 1.0))) / 2
