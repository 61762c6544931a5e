"""A run's training-state file (``run.state.safetensors``): the optimizer's slots, the data position and the RNG
beside the weights (see ``engine.training.resume_point``). The data position is global: ``batch_index`` counts the
batches of the epoch consumed by all processes together, so a run resumes at the same place with any number of
processes."""

from __future__ import annotations

from pathlib import Path

import torch

from attnviz.engine.checkpoints.store import load_tensors, save_tensors
from attnviz.engine.errors import CheckpointError
from attnviz.engine.training.resume_point import weights_entries

STATE_VERSION = 1


def save_state(path: Path, opt, step: int, epoch: int, batch_index: int, extra: dict,
               weights: dict[str, torch.Tensor]) -> None:
    tensors = {"rng.torch": torch.get_rng_state(), **weights_entries(weights)}
    for i, state in opt.state_dict()["state"].items():
        for key, value in state.items():
            tensors[f"opt.{i}.{key}"] = value if torch.is_tensor(value) else torch.tensor(value)
    groups = [{k: v for k, v in g.items() if k != "params"} | {"params": g["params"]}
              for g in opt.state_dict()["param_groups"]]
    meta = {"kind": "training-state", "state_version": STATE_VERSION, "step": step, "epoch": epoch,
            "batch_index": batch_index, "param_groups": groups, **extra}
    save_tensors(path, tensors, meta)


def param_names(model: torch.nn.Module) -> list[str]:
    """The model's parameter names in optimizer order (a training-state file records them)."""
    return [name for name, _ in model.named_parameters()]


def load_state(path: Path, opt, names: list[str]) -> dict:
    """Restore the optimizer (its slots follow the model's parameter ``names``, in order) and the RNG."""
    meta, tensors = load_tensors(path)
    if meta.get("kind") != "training-state" or meta.get("state_version") != STATE_VERSION:
        raise CheckpointError(f"{path} is not an attnviz training-state file of version {STATE_VERSION}.")
    if meta.get("param_names", names) != names:
        raise CheckpointError(f"{path} was written for a model whose parameters differ or come in another order; "
                              "it cannot be resumed. Start a new run, or fine-tune from the run's checkpoint.")
    state: dict[int, dict] = {}
    for name, value in tensors.items():
        if name.startswith("opt."):
            _, index, key = name.split(".", 2)
            state.setdefault(int(index), {})[key] = value
    groups = [dict(g, betas=tuple(g["betas"])) for g in meta["param_groups"]]
    opt.load_state_dict({"state": state, "param_groups": groups})
    torch.set_rng_state(tensors["rng.torch"].to(torch.uint8))
    return meta
