"""The training loop as a generator of typed events, with a stop flag checked between steps.

``train(recipe, out)`` reads and tokenizes the corpus (``engine.training.prepare``), builds vocabularies and the
model, and yields the events of ``engine.events.TrainEvent``: ``TrainNote``s, ``TrainStarted``, a ``TrainStep`` per
optimizer step, an ``EvalResult`` per evaluation, ``CheckpointSaved`` for every file written, and ends with
``TrainFinished``, ``TrainStopped`` or ``TrainFailed``; a consumer that stops early closes the generator. Files for
``out`` = ``run.safetensors``: ``run.safetensors`` (best by the recipe's metric), ``run.last.safetensors``
(latest), ``run.state.safetensors`` (optimizer, schedule, data position and RNG: what ``resume`` needs, kept apart
so inference checkpoints stay small) and, with ``save_epochs``, ``run.epochN.safetensors``.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import TypeVar

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnviz.engine.checkpoints.store import load_tensors
from attnviz.engine.corpus.batching import batch_tensors
from attnviz.engine.errors import ConfigError
from attnviz.engine.events import (
    CheckpointSaved,
    EvalResult,
    EvalStarted,
    TrainEvent,
    TrainFailed,
    TrainFinished,
    TrainNote,
    TrainStarted,
    TrainStep,
    TrainStopped,
)
from attnviz.engine.metrics import smoothed_loss
from attnviz.engine.models.protocol import count_parameters, load_stored_state
from attnviz.engine.text.vocab import PAD_ID
from attnviz.engine.training.clock import remaining_seconds
from attnviz.engine.training.distributed import Ranks, join, peer_failure
from attnviz.engine.training.divergence import DivergenceWatch
from attnviz.engine.training.prepare import PreparationStopped
from attnviz.engine.training.presets import Recipe
from attnviz.engine.training.resume_point import SaveError
from attnviz.engine.training.runs import RESUME_AT
from attnviz.engine.training.schedule import learning_rate, warmup_warning
from attnviz.engine.training.trainer import Trainer
from attnviz.engine.training.views_file import step_row

# Training's attention kernels leave out cuDNN's, PyTorch's first choice for bf16 on a Hopper GPU: it builds an
# execution plan for every new (batch, source, target) shape, 0.1 to 4.5 s each, and an epoch of length-bucketed
# Multi30k batches has about 120 shapes, so bf16's first epoch ran at a tenth of fp32's speed on an H100 (seen there).
# The memory-efficient kernel takes any shape at once and is as fast once warm; CPU and fp32 runs never used cuDNN's.
TRAIN_ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


STOPPED_PREPARING = "Stopped while the data was being prepared: nothing was trained, and nothing was saved."
Work = TypeVar("Work")  # what rank 0's work yields


def train(recipe: Recipe, out: str | os.PathLike, data_dir=None, resume: bool = False,
          stop: threading.Event | None = None, max_steps: int = 0) -> Generator[TrainEvent, None, None]:
    """Train ``recipe`` and write its checkpoints next to ``out``; see the module docstring for the events.

    ``max_steps`` ends the run after that many optimizer steps in total (resumed steps included). Under torchrun
    every process runs this generator; see ``engine.training.distributed`` for what each rank does.
    """
    run, ranks = None, Ranks()
    try:
        ranks, device = join(recipe.train.device)
        run = Trainer(recipe, out, data_dir, resume, ranks, device, stop)
        yield from (TrainNote(note) for note in run.notes)
        if resume:
            yield run.shown
        yield from _train(run, max_steps, stop)
    except PreparationStopped:  # stopped before the first step: there is nothing to save
        yield TrainNote(STOPPED_PREPARING)
    except SaveError as exc:
        yield TrainFailed(str(exc), run.last_good if run else None)
    except RuntimeError as exc:
        lost = peer_failure(exc, ranks)  # another process of the run died: one line, not the collective's frames
        if lost is None:
            raise
        yield TrainFailed(lost, run.last_good if run else None)
    finally:
        gc.unfreeze()  # the run's objects become collectable again (a GUI may train many runs in one process)
        if run is not None:
            del run.forward  # DDP's reducer goes before the process group it uses (else exit may abort)
        ranks.close()


def _train(run: Trainer, max_steps: int, stop: threading.Event | None) -> Iterator[TrainEvent]:
    cfg, ranks = run.cfg, run.dist
    steps_per_epoch = len(run.batches(1)) // ranks.world
    if not steps_per_epoch:
        raise ConfigError(f"an epoch has {len(run.batches(1))} batches, fewer than the {ranks.world} processes; "
                          "use fewer processes or smaller batches", settings=("batch_size", "max_tokens"))
    planned = steps_per_epoch * cfg.epochs  # what the schedule spans, even when max_steps ends the run sooner
    total = min(planned, max_steps or 1 << 62)
    yield TrainStarted(total, cfg.epochs, count_parameters(run.model), len(run.data.train), len(run.data.val),
                       str(run.device), run.step, ranks.world)
    warning = warmup_warning(cfg, planned)
    if warning:  # said before the first step, where the user can still stop and fix it
        yield TrainNote(warning, warning=True)
    started, window_tokens, first_step = time.perf_counter(), 0, run.step
    # rates and the ETA count only the steps' own time: a paused consumer holds a yield, and evaluations are not
    # training, so neither may make tokens/s drop or the ETA grow
    busy, window_busy = 0.0, 0.0
    run.model.train()
    epoch_start, watch = run.epoch, DivergenceWatch()
    yield from _redo_skipped_evaluation(run)
    for epoch in range(epoch_start, cfg.epochs + 1):
        run.epoch = epoch
        batches = run.batches(epoch)
        for index in ranks.steps(len(batches), run.batch_index if epoch == epoch_start else 0):
            if _stopping(ranks, stop) or (max_steps and run.step >= max_steps):
                yield from _main_only(run, _resume_point, run, epoch, index)
                if max_steps and run.step >= max_steps:
                    yield TrainFinished(_best_written(run), str(run.paths.last), None)
                else:
                    yield TrainStopped(run.step, str(run.paths.last))
                return
            step_start = time.perf_counter()
            loss, tokens, lr, problem = _step(run, batches[index + ranks.rank], planned, watch)
            if problem:
                yield TrainFailed(problem, run.last_good)
                return
            window_tokens += tokens
            now = time.perf_counter()
            busy, window_busy = busy + now - step_start, window_busy + now - step_start
            event = TrainStep(run.step, epoch, loss, lr, window_tokens / max(window_busy, 1e-9),
                              run.step / total, remaining_seconds(busy, run.step - first_step, total - run.step))
            run.curve.append(step_row(event))
            yield event
            # a Stop during the step skips the evaluation (minutes): the next turn saves the resume point and stops
            if cfg.eval_every and run.step % cfg.eval_every == 0 and not _stopping(ranks, stop):
                yield from _main_only(run, _evaluate_and_save, run, now - started, epoch, index + ranks.world)
                window_tokens, window_busy = 0, 0.0
        if _epoch_end_work(run, epoch) and _stopping(ranks, stop):  # skipped on the way out; a resume does it
            yield from _main_only(run, _resume_point, run, epoch, len(batches))
            yield TrainStopped(run.step, str(run.paths.last))
            return
        if not cfg.eval_every or cfg.save_epochs:
            yield from _main_only(run, _epoch_end, run, time.perf_counter() - started, epoch)
            window_tokens, window_busy = (0, 0.0) if not cfg.eval_every else (window_tokens, window_busy)
    if cfg.eval_every and run.step % cfg.eval_every:  # the steps after the last evaluation count too
        yield from _main_only(run, _evaluate_and_save, run, time.perf_counter() - started, cfg.epochs + 1, 0)
    yield from _main_only(run, _run_end, run)
    yield TrainFinished(_best_written(run), str(run.paths.last), run.history[-1] if run.history else None)


def _stopping(ranks: Ranks, stop: threading.Event | None) -> bool:
    """Whether any rank was asked to stop; every rank asks at the same points, so the collective stays in step."""
    return ranks.agree(stop is not None and stop.is_set())


def _epoch_end_work(run: Trainer, epoch: int) -> bool:
    """Whether an evaluation or an epoch file follows ``epoch``'s last step (a Stop then skips it)."""
    cfg = run.cfg
    return bool(not cfg.eval_every or cfg.save_epochs or (epoch == cfg.epochs and run.step % cfg.eval_every))


def _redo_skipped_evaluation(run: Trainer) -> Iterator[TrainEvent]:
    """A resumed run whose last step's evaluation a Stop skipped on its way out: that evaluation, first."""
    cfg = run.cfg
    if cfg.eval_every and run.step and run.step % cfg.eval_every == 0 and \
            not any(r.step == run.step for r in run.history):
        yield from _main_only(run, _evaluate_and_save, run, 0.0, run.epoch, run.batch_index)


def _best_written(run: Trainer) -> str | None:
    """The best checkpoint's path, or None when no evaluation wrote one (a --max-steps run that stopped first)."""
    return str(run.paths.best) if run.paths.best.exists() else None


def _step(run: Trainer, indices: list[int], planned: int, watch: DivergenceWatch
          ) -> tuple[float, int, float, str | None]:
    """One optimizer step on this rank's batch: (loss averaged over ranks, target tokens of all ranks, learning
    rate, why training must stop or None; then no step was taken)."""
    cfg = run.cfg
    src, tgt = (t.to(run.device) for t in batch_tensors([run.data.train[i] for i in indices]))
    lr = learning_rate(run.step + 1, cfg, run.translator.config.d_model, planned)
    for group in run.opt.param_groups:
        group["lr"] = lr
    with torch.autocast(run.device.type, dtype=torch.bfloat16, enabled=run.amp), sdpa_kernel(TRAIN_ATTENTION):
        loss = smoothed_loss(run.forward(src, tgt[:, :-1], cfg.teacher_forcing), tgt[:, 1:], cfg.label_smoothing)
    loss_value, tokens = run.dist.mean_loss(loss, int((tgt[:, 1:] != PAD_ID).sum()))
    problem = _loss_problem(loss_value, run.step + 1, lr, watch)
    if problem:
        return loss_value, tokens, lr, problem
    run.opt.zero_grad(set_to_none=True)
    loss.backward()  # under DDP: the gradients are averaged over the ranks here
    if cfg.clip_norm:
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.clip_norm)
    run.opt.step()
    run.step += 1
    if run.device.type == "cuda":
        torch.cuda.synchronize(run.device)  # the step's time is its own, not the next step's
    return loss_value, tokens, lr, None


def _main_only(run: Trainer, work: Callable[..., Iterator[Work]], *args) -> Iterator[Work]:
    """Rank 0 does ``work(*args)`` (evaluating, saving) while the other ranks wait; every rank learns whether it
    failed to save (``SaveError``), so none is left waiting. In a single process: just ``work(*args)``."""
    failure = None
    if run.dist.is_main:
        try:
            yield from work(*args)
        except SaveError as exc:
            failure = exc
    if run.dist.agree(failure is not None):
        raise failure or SaveError("rank 0 could not save a checkpoint (its message says why); every rank stopped.")


def _resume_point(run: Trainer, epoch: int, index: int) -> Iterator[CheckpointSaved]:
    yield run.save_resume_point(epoch, index)


def _epoch_end(run: Trainer, elapsed: float, epoch: int) -> Iterator[TrainEvent]:
    if not run.cfg.eval_every:
        yield from _evaluate_and_save(run, elapsed, epoch + 1, 0)
    if run.cfg.save_epochs:
        yield run.save(run.paths.epoch(epoch), "epoch")


def _run_end(run: Trainer) -> Iterator[TrainEvent]:
    yield run.save_resume_point(run.cfg.epochs + 1, 0)  # the end of a run always saves (no-op if it just did)
    yield from _average(run)


def _loss_problem(loss: float, step: int, lr: float, watch: DivergenceWatch) -> str | None:
    """Why training must stop at this loss: not finite, or diverging (see engine.training.divergence); else None."""
    if not math.isfinite(loss):
        return (f"the training loss became {loss} at step {step} (learning rate {lr:.3g}); training stopped. Lower "
                "the learning rate or raise the warm-up, then resume or start again.")
    return watch.update(loss, step, lr)


def _evaluate_and_save(run: Trainer, elapsed: float, next_epoch: int, next_index: int
                       ) -> Iterator[EvalStarted | EvalResult | CheckpointSaved]:
    yield run.eval_started()
    result = run.evaluate(elapsed)
    run.history.append(result.record)
    run.evaluations.append(result)
    yield result
    score = run.score(result.record)
    if run.best_score is None or score > run.best_score:
        run.best_score = score
        yield run.save(run.paths.best, "best", {RESUME_AT: [next_epoch, next_index]})  # resumable if all else is lost
    yield run.save_resume_point(next_epoch, next_index)


def _average(run: Trainer) -> Iterator[EvalStarted | EvalResult | CheckpointSaved]:
    """Average the last N epoch snapshots; keep the average as best if validation says it is better."""
    n = run.cfg.average_last
    paths = [run.paths.epoch(e) for e in range(run.cfg.epochs - n + 1, run.cfg.epochs + 1)] if n else []
    if n < 2 or not all(p.exists() for p in paths):
        return
    states = [load_tensors(p)[1] for p in paths]
    averaged = {k: sum((s[k] for s in states[1:]), states[0][k]) / len(states) for k in states[0]}
    load_stored_state(run.model, averaged)
    yield run.eval_started()
    result = run.evaluate(0.0)
    record = dataclasses.replace(result.record, averaged_epochs=tuple(p.name for p in paths))
    yield result
    run.evaluations.append(result)
    if run.score(record) > (run.best_score if run.best_score is not None else -math.inf):
        run.best_score = run.score(record)
        run.history.append(record)
        yield run.save(run.paths.best, "average")
    else:
        run.history.append(dataclasses.replace(record, kept=False))
