"""Where and how fast training steps: the device a run uses and the learning-rate schedules (constant, noam,
inverse square root, one-cycle), each a pure function of the step."""

from __future__ import annotations

import math

import torch

from attnviz.engine.config import WARMUP_SCHEDULES, TrainConfig
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


def warmup_warning(cfg: TrainConfig, total_steps: int) -> str | None:
    """Why a run of ``total_steps`` optimizer steps will disappoint because of its warm-up, or None: with a warm-up
    schedule longer than the run, the rate climbs the whole time and never reaches the peak it was tuned for."""
    if cfg.schedule not in WARMUP_SCHEDULES or cfg.warmup <= total_steps:
        return None
    return (f"train.warmup is {cfg.warmup:,} steps but the whole run is {total_steps:,} steps: the learning rate is "
            f"still warming up when training ends (it reaches {total_steps / cfg.warmup:.0%} of its peak), so the "
            f"model will barely learn. Lower train.warmup (e.g. to {max(1, total_steps // 10):,}) or train more "
            "epochs.")


def _one_cycle(step: int, total: int, peak: float, rise: float = 0.3) -> float:
    """torch's OneCycleLR (cosine annealing): peak/25 -> peak over ``rise`` of the run, then -> peak/25e4."""
    start, end = peak / 25, peak / 25 / 1e4
    top = max(rise * total - 1, 1)
    if step - 1 <= top:
        frac, low, high = (step - 1) / top, start, peak
    else:
        frac, low, high = (step - 1 - top) / max(total - 1 - top, 1), peak, end
    return high + (low - high) * (1 + math.cos(math.pi * min(frac, 1.0))) / 2
