"""Command-line sub-commands for training: ``train``, ``release`` and ``presets`` (``evaluate`` is in
``cli.evaluate``, the corpora's ``data`` in ``cli.data``).

``train`` consumes the engine's training generator (``engine.events.TrainEvent``), printing a progress line and one
summary line per evaluation, and closes it when the run ends, fails or is stopped (Ctrl+C saves a resumable
checkpoint first); ``--nproc N`` hands the same command to torchrun.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, assert_never

from attnviz.cli.args import BEAM, FINITE_NUMBER, WHOLE_NUMBER, add_data_dir, int_range
from attnviz.cli.jsonout import json_text
from attnviz.cli.progress import ProgressLine, bar
from attnviz.engine.config import TrainConfig
from attnviz.engine.errors import ConfigError, InputError
from attnviz.engine.training.clock import format_clock, format_left

if TYPE_CHECKING:
    from attnviz.engine.events import TrainEvent, TrainStep

TRAIN_FLAGS = {  # flag -> recipe setting
    "epochs": "train.epochs", "lr": "train.lr", "batch_size": "train.batch_size", "max_tokens": "train.max_tokens",
    "seed": "train.seed", "device": "train.device", "label_smoothing": "train.label_smoothing",
    "warmup": "train.warmup", "schedule": "train.schedule", "threads": "train.threads",
    "eval_every": "train.eval_every", "precision": "train.precision",
}


def add_commands(sub) -> None:
    p = sub.add_parser("train", help="train a model from a preset recipe",
                       description="Train a preset (see `attnviz presets`); any recipe setting can be changed with "
                                   "its flag or --set SECTION.FIELD=VALUE (e.g. --set model.d_model=128).")
    p.add_argument("--preset", help="recipe name (not needed with --resume)")
    p.add_argument("--out", help="best checkpoint path (default: runs/PRESET.safetensors)")
    p.add_argument("--resume", metavar="CKPT", help="continue the run whose checkpoint is CKPT")
    add_data_dir(p)
    p.add_argument("--max-steps", type=int_range(0, 10**12), default=0,
                   help="stop after this many optimizer steps in total")
    p.add_argument("--nproc", type=int_range(1, 1024), default=1,
                   help="train with N processes on this machine (DistributedDataParallel, started through torchrun; "
                        "one per GPU on CUDA); see the README for several machines")
    for flag, setting in TRAIN_FLAGS.items():
        p.add_argument("--" + flag.replace("_", "-"), dest=flag, type=_flag_type(flag), help=f"sets {setting}")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override any recipe setting")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("release", help="measure a trained checkpoint and write it for bundling, metrics inside")
    p.add_argument("checkpoint")
    p.add_argument("--out", required=True, help="the file to write (e.g. models/de-en-multi30k.safetensors)")
    p.add_argument("--name", help="display name stored in the file")
    p.add_argument("--beam", type=BEAM, default=5, help="beam width measured beside greedy (default 5)")
    p.add_argument("--half", choices=["auto", "yes", "no"], default="auto",
                   help="store float16 weights; auto: only if test bleu_tok moves by at most 0.1")
    add_data_dir(p)
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("presets", help="list the training recipes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_presets)


def _flag_type(field: str):
    """A recipe flag's argparse type, from its ``TrainConfig`` field: a number is read as one here (``nan``, ``inf``
    and thousands of digits are usage errors); its range is the config's to check (``_recipe``)."""
    kind = {f.name: f.type for f in dataclasses.fields(TrainConfig)}[field]
    return {"int": WHOLE_NUMBER, "float": FINITE_NUMBER}.get(str(kind))


def _recipe(args: argparse.Namespace):
    """The recipe to train, with the flags' and ``--set``'s changes: a value the recipe refuses is a usage error
    (exit 2), like any other option value out of range."""
    from attnviz.engine.training.presets import get_preset
    from attnviz.engine.training.runs import recipe_of_run, run_checkpoint

    if args.resume:
        # any file of a run (best, .last, .state, .epochN) resumes that run; its best is never written over .last
        base, out = recipe_of_run(args.resume), str(run_checkpoint(args.resume))
    elif args.preset:
        base, out = get_preset(args.preset), args.out
    else:
        raise ConfigError("say what to train: --preset NAME (see `attnviz presets`) or --resume CHECKPOINT")
    try:
        recipe = base.override(_overrides(args))
    except ConfigError as exc:
        raise InputError(str(exc), settings=exc.settings) from None
    return recipe, out or str(Path("runs") / f"{recipe.name}.safetensors")


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    settings = {setting: getattr(args, flag) for flag, setting in TRAIN_FLAGS.items()
                if getattr(args, flag) is not None}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        settings[key.strip()] = value.strip()
    return settings


def cmd_train(args: argparse.Namespace) -> int:
    from attnviz.engine import events as ev
    from attnviz.engine.training.distributed import exit_worker, world_size
    from attnviz.engine.training.loop import train

    recipe, out = _recipe(args)
    if args.nproc > 1:  # the settings are valid (checked once, above): start the processes
        _check_gpus(recipe.train.device, args.nproc)
        return _torchrun(args)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl+C or kill: save a resumable checkpoint, then exit
        signal.signal(sig, lambda *_: stop.set())
    show = _Progress(recipe.name, out) if world_size() == 1 or os.environ.get("RANK") == "0" else None
    code = 0
    events = train(recipe, out, args.data_dir, resume=bool(args.resume), stop=stop, max_steps=args.max_steps)
    for event in events:
        if show:  # under torchrun only rank 0 prints
            show(event)
        if isinstance(event, (ev.TrainStopped, ev.TrainFailed)):
            code = 130 if isinstance(event, ev.TrainStopped) else 1
            break
    events.close()  # leaves the process group, if any
    if stop.is_set() and code == 0:  # stopped before the first step (while the data was prepared): still a stop
        code = 130
    if world_size() > 1:
        exit_worker(code)
    return code


def _check_gpus(device_name: str, nproc: int) -> None:
    """On CUDA each process needs a GPU of its own: refuse once, before torchrun starts any (else the worker without
    one fails while the others wait in the process group's rendezvous until torchrun kills them 30 s later)."""
    import torch

    from attnviz.engine.training.schedule import pick_device

    gpus = torch.cuda.device_count()
    if pick_device(device_name).type == "cuda" and nproc > gpus:
        raise ConfigError(f"--nproc {nproc} needs a GPU for each process and this machine has {gpus}: start at most "
                          "one process per GPU", settings=("device",))


def _torchrun(args: argparse.Namespace) -> int:
    """``attnviz train --nproc N ...`` runs ``torchrun --standalone --nproc_per_node N -m attnviz train ...`` in
    this process: SIGINT or SIGTERM reaches torchrun, which hands it to every worker (each stops after the same
    step; rank 0 saves). Exit status: 0 done, 130 stopped, 1 a worker failed (its message is printed above)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    from attnviz.engine.training.distributed import world_size

    if world_size() > 1:
        raise ConfigError("--nproc starts torchrun itself: under torchrun, leave it out")
    rest, skip = [], False
    for arg in args.argv:
        if skip or arg == "--nproc":
            skip = not skip and arg == "--nproc"
        elif not arg.startswith("--nproc="):
            rest.append(arg)
    _quiet_launcher()
    try:
        torchrun(["--standalone", "--nproc_per_node", str(args.nproc), "-m", "attnviz", *rest])
    except SignalException:
        return 130
    except ChildFailedError as exc:
        rank, code = _first_cause({r: f.exitcode for r, f in exc.failures.items()})
        stopped = code == 130
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        print(f"attnviz: {'stopped' if stopped else 'error: training process ' + str(rank) + ' failed'} ({how})",
              file=sys.stderr)
        return 130 if stopped else 1
    return 0


def _first_cause(codes: dict[int, int]) -> tuple[int, int]:
    """The failed process to name, and its exit status: one killed by a signal caused the others' failures (they
    lost their peer and said so themselves), so it is named before any that ended by itself; then the lowest rank
    (torchrun's own first failure is a tie of detection times when several end together)."""
    rank = min(codes, key=lambda r: (codes[r] >= 0, r))
    return rank, codes[rank]


def _quiet_launcher() -> None:
    """torchrun logs each worker's failure and each signal it forwards (two lines with pids and times); the launcher
    says the same in one line of its own (``_torchrun``), so its loggers keep only critical messages."""
    import logging

    for name in list(logging.Logger.manager.loggerDict):
        if name.startswith(("torch.distributed.elastic", "torch.distributed.run")):
            logging.getLogger(name).setLevel(logging.CRITICAL)


class _Progress:
    """Prints a run's events: a progress line, one line per evaluation and per saved best checkpoint."""

    def __init__(self, name: str, out: str):
        self.name, self.out, self.line, self.last_print = name, out, ProgressLine(), 0.0

    def __call__(self, event: TrainEvent) -> None:
        from attnviz.engine import events as ev

        match event:
            case ev.TrainStarted():
                self._say(f"training {self.name}: {event.parameters:,} parameters, {event.train_pairs:,} train / "
                          f"{event.val_pairs:,} val pairs, {event.total_steps:,} steps on {event.device}"
                          + (f" x {event.processes} processes" if event.processes > 1 else "")
                          + (f", resuming at step {event.resumed_from_step}" if event.resumed_from_step else ""))
            case ev.TrainStep():
                self._step(event)
            case ev.EvalResult(record=r):
                self._say(f"eval step {r.step} epoch {r.epoch}: val loss {r.loss:.3f} ppl {r.ppl:.2f} "
                          f"acc {r.accuracy:.3f}"
                          + (f" bleu_tok {r.bleu:.2f}" if r.bleu is not None else
                             f" samples {', '.join(s.output for s in event.samples)}")
                          + f" ({format_clock(r.seconds)})")
            case ev.CheckpointSaved(role="best" | "average"):
                self._say(f"  saved {event.role}: {event.path}")
            case ev.CheckpointSaved():
                pass  # routine saves (the resume point, epoch snapshots) print nothing
            case ev.TrainFinished():
                best = f"best {event.best_path}" if event.best_path else "no evaluation, so no best checkpoint"
                self._say(f"finished: {best}; last {event.last_path}")
            case ev.TrainStopped():
                self._say(f"stopped at step {event.step}; resume with --resume {self.out}")
            case ev.TrainNote():
                self._say(f"{'warning' if event.warning else 'note'}: {event.message}", sys.stderr)
            case ev.TrainHistory():
                final = event.evaluations[-1].record if event.evaluations else None
                self._say(f"restored the run's history: {len(event.steps):,} steps, {len(event.evaluations)} "
                          "evaluations" + (f" (last: step {final.step}, val loss {final.loss:.3f})" if final else ""))
            case ev.EvalStarted():  # it can take a minute: say so on a line of its own, or the run looks stuck
                self.line.end()
                self.line.write(f"evaluating at step {event.step:,}: validation loss" +
                                (f", then translating {event.sentences:,} sentences for BLEU..." if event.sentences
                                 else " and samples..."))
            case ev.TrainFailed():
                last = f" Last good checkpoint: {event.last_good}" if event.last_good else \
                    " No resumable checkpoint was saved yet."
                self._say(f"attnviz: error: {event.message}{last}", sys.stderr)
            case _:
                assert_never(event)

    def _say(self, text: str, stream: TextIO | None = None) -> None:
        """A message on a line of its own (after an open progress line): results on stdout, notes on stderr."""
        self.line.end()
        print(text, file=stream or sys.stdout, flush=True)

    def _step(self, event: TrainStep) -> None:
        """The progress line: rewritten in place twice a second on a terminal, a new line every 30 s in a log."""
        now = time.monotonic()
        if now - self.last_print < (0.5 if self.line.tty else 30):
            return
        self.last_print = now
        line = (f"epoch {event.epoch} [{bar(event.progress)}] {event.progress:6.1%} step {event.step} "
                f"loss {event.loss:.3f} lr {event.lr:.2e} {event.tokens_per_s:,.0f} tok/s "
                f"{format_left(event.eta_s)}")
        self.line.write(line)


def cmd_release(args: argparse.Namespace) -> int:
    from attnviz.engine.training.release import release

    metrics = release(args.checkpoint, args.out, args.name, args.beam, args.half, args.data_dir)
    print(json_text(metrics, indent=2, ensure_ascii=False))
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    from attnviz.engine.training.presets import PRESETS

    if args.json:
        print(json_text({name: r.to_dict() for name, r in PRESETS.items()}, indent=2))
        return 0
    for name, recipe in PRESETS.items():
        print(f"{name}\n    {recipe.description}")
    return 0
