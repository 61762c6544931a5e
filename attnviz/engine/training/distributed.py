"""Training in several processes under torchrun: the process group, DistributedDataParallel and each rank's batches.

One process (no ``WORLD_SIZE`` in the environment, or ``WORLD_SIZE=1``) initialises nothing: every method below
then does exactly what a single run did before. Under ``torchrun --nproc_per_node N`` (or ``attnviz train --nproc
N``, which starts it) each worker joins a process group (``gloo`` on CPU, ``nccl`` on CUDA, one GPU per local rank):

* Batches: every rank builds the epoch's length-bucketed batch list with the same seed (seed and epoch), so all
  see the same list, reshuffled identically each epoch. From the epoch's global position ``start`` (batches
  consumed by all ranks together: what the state file records) one step takes the next N batches, rank r the r-th.
  The epoch's last ``(len - start) % N`` batches are left out, so every rank takes the same number of steps (no
  rank waits forever for another) and a resume with another number of processes continues at the same place.
* DDP averages the gradients of the ranks' mean losses; the loss a step reports is the mean over ranks, so every
  rank takes the same decisions (not finite, diverging).
* Only rank 0 evaluates and writes files; the others wait in ``agree``, which also tells them whether rank 0 failed.
* A stop request (SIGINT or SIGTERM: torchrun forwards either to every worker) is agreed on before each step, so
  all ranks stop after the same step and rank 0 saves a resumable checkpoint.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from attnviz.engine.errors import ConfigError
from attnviz.engine.training.schedule import pick_device

WAIT = timedelta(hours=2)  # how long a rank waits at a barrier (rank 0 evaluating a large model) before giving up


@dataclass(frozen=True)
class Ranks:
    """This process's place among the run's processes."""

    rank: int = 0
    world: int = 1
    device: torch.device = torch.device("cpu")  # where collectives' tensors live (nccl needs the GPU)

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def steps(self, batches: int, start: int) -> range:
        """The global index of each step's first batch, from position ``start`` of an epoch of ``batches``."""
        whole = max(batches - start, 0) // self.world * self.world
        return range(start, start + whole, self.world)

    def agree(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is true on any; every rank waits here for all the others."""
        if not self.active:
            return flag
        value = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def mean_loss(self, loss: torch.Tensor, tokens: int) -> tuple[float, int]:
        """The step's loss averaged over ranks, and its target tokens summed over ranks."""
        if not self.active:
            return loss.item(), tokens
        values = torch.stack([loss.detach().float(), torch.tensor(float(tokens), device=loss.device)])
        dist.all_reduce(values)
        return values[0].item() / self.world, int(values[1].item())

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """What a training step calls: the model itself, or its DistributedDataParallel wrapper (checkpoints keep
        saving the model itself, so no weight name ever carries DDP's ``module.`` prefix)."""
        if not self.active:
            return model
        ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)

    def close(self) -> None:
        """Leave the process group; every rank arrives here after the same last collective (``agree``)."""
        if self.active and dist.is_initialized():
            dist.destroy_process_group()


# Words of the transport errors a collective raises when another process of the run is gone (killed, crashed, its
# machine lost): torch raises some as DistError, others (gloo's "Connection closed by peer") as a plain RuntimeError.
_TRANSPORT = ("gloo", "nccl", "connection closed", "connection reset", "broken pipe", "timed out")


def peer_failure(exc: BaseException, ranks: Ranks) -> str | None:
    """The one line for ``exc`` when it means that another process of the run failed, else None (a bug or a user's
    error stays what it is). The failed process is the launcher's to name, with its own line; this one says what
    happened here, without the 20 frames of the collective that noticed."""
    if not ranks.active or not isinstance(exc, RuntimeError):
        return None
    lines = str(exc).strip().splitlines() or [""]
    if not isinstance(exc, dist.DistError) and not any(word in lines[0].lower() for word in _TRANSPORT):
        return None
    reason = re.sub(r"^\[[^\]]*\]\s*", "", lines[0]).split(". ")[0][:120]  # without gloo's "[file.cc:553]"
    return (f"training process {ranks.rank} stopped because another process of the run ended or stopped answering "
            f"({reason}).")


def exit_worker(code: int):
    """End a torchrun worker now, its output flushed and its process group already left (``Ranks.close``).

    Skipping the interpreter's teardown is deliberate: a worker sometimes aborted there (SIGABRT, "terminate called
    without an active exception", no Python frame left: gloo's threads destroyed during C++ static teardown; 2 of
    about 20 runs of tests/test_cli_train_ddp.py), which torchrun reports as a failed run although every
    checkpoint was written.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def world_size() -> int:
    """How many processes this run has (torchrun sets ``WORLD_SIZE``; 1 without it)."""
    try:
        return max(int(os.environ.get("WORLD_SIZE", "1")), 1)
    except ValueError:
        return 1


def join(device_name: str) -> tuple[Ranks, torch.device]:
    """This process's ranks and training device; under torchrun, joins the process group (once per process)."""
    device, world = pick_device(device_name), world_size()
    if world == 1:
        return Ranks(device=device), device
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        if local >= torch.cuda.device_count():
            raise ConfigError(f"local rank {local} has no GPU of its own ({torch.cuda.device_count()} here): start "
                              "at most one process per GPU (--nproc / --nproc_per_node)", settings=("device",))
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=WAIT)
    return Ranks(rank, world, device), device
