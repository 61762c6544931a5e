"""The training loop as a generator of typed events, with a stop flag checked between steps.

``train(recipe, out)`` reads and tokenizes the corpus, builds vocabularies and the model, and yields
``TrainStarted``, a ``TrainStep`` per optimizer step, an ``EvalResult`` per evaluation, ``CheckpointSaved`` for
every file written, and ends with ``TrainFinished``, ``TrainStopped`` or ``TrainFailed``. Files for ``out`` =
``run.safetensors``: ``run.safetensors`` (best by the recipe's metric), ``run.last.safetensors`` (latest),
``run.state.safetensors`` (optimizer, schedule, data position and RNG: what ``resume`` needs, kept apart so
inference checkpoints stay small) and, with ``save_epochs``, ``run.epochN.safetensors``.
"""

from __future__ import annotations

import gc
import math
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from attnviz.config import TrainConfig, check_training
from attnviz.engine.batching import batch_tensors, eval_batches, make_batches
from attnviz.engine.checkpoint import load_tensors, save_tensors
from attnviz.engine.data import Pair, load_splits, resolve_data_dir
from attnviz.engine.errors import CheckpointError, ConfigError
from attnviz.engine.events import (CheckpointSaved, EvalResult, TrainFailed, TrainFinished, TrainStarted, TrainStep,
                                   TrainStopped)
from attnviz.engine.metrics import bleu_tok, smoothed_loss, teacher_forced_stats
from attnviz.engine.model import count_parameters
from attnviz.engine.presets import Recipe
from attnviz.engine.runs import RunPaths
from attnviz.engine.translator import Translator, build_model, load_translator
from attnviz.engine.vocab import PAD_ID, Vocab

STATE_VERSION = 1


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was asked for but no CUDA GPU is available; use --device cpu or auto")
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


@dataclass
class Prepared:
    """A corpus tokenized and encoded for one recipe."""

    src_vocab: Vocab
    tgt_vocab: Vocab
    train: list[tuple[list[int], list[int]]]
    val: list[tuple[list[int], list[int]]]
    val_pairs: list[Pair]
    val_refs: list[list[str]]


def prepare(recipe: Recipe, data_dir=None, vocabs: tuple[Vocab, Vocab] | None = None,
            max_positions: int | None = None) -> Prepared:
    """Read, tokenize and encode; vocabularies come from the training split unless given (resume)."""
    splits = load_splits(recipe.corpus, resolve_data_dir(data_dir))
    src_spec, tgt_spec = recipe.src_tokenizer, recipe.tgt_tokenizer
    train_tok = [(src_spec.tokenize(s), tgt_spec.tokenize(t)) for s, t in splits.train]
    val_tok = [(src_spec.tokenize(s), tgt_spec.tokenize(t)) for s, t in splits.val]
    has_source = recipe.has_source
    if vocabs is None:  # a language model's one vocabulary serves as both sides
        tgt_vocab = Vocab.build((t for _, t in train_tok), recipe.min_freq)
        vocabs = (Vocab.build((s for s, _ in train_tok), recipe.min_freq) if has_source else tgt_vocab, tgt_vocab)
    limit = (max_positions or recipe.model.get("max_positions", 100)) - 2

    def encode(pairs):  # a language model reads no source: its source ids stay empty
        return [(vocabs[0].encode(s[:limit], True) if has_source else [], vocabs[1].encode(t[:limit], True))
                for s, t in pairs if t and (s or not has_source)]

    return Prepared(vocabs[0], vocabs[1], encode(train_tok), encode(val_tok), splits.val, [t for _, t in val_tok])


def _optimizer(model, cfg: TrainConfig) -> torch.optim.Adam:
    return torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps,
                            weight_decay=cfg.weight_decay)


def _save_state(path: Path, opt, step: int, epoch: int, batch_index: int, extra: dict) -> None:
    tensors = {"rng.torch": torch.get_rng_state()}
    for i, state in opt.state_dict()["state"].items():
        for key, value in state.items():
            tensors[f"opt.{i}.{key}"] = value if torch.is_tensor(value) else torch.tensor(value)
    groups = [{k: v for k, v in g.items() if k != "params"} | {"params": g["params"]}
              for g in opt.state_dict()["param_groups"]]
    meta = {"kind": "training-state", "state_version": STATE_VERSION, "step": step, "epoch": epoch,
            "batch_index": batch_index, "param_groups": groups, **extra}
    save_tensors(path, tensors, meta)


def _param_names(model: torch.nn.Module) -> list[str]:
    """The model's parameter names in optimizer order (a training-state file records them)."""
    return [name for name, _ in model.named_parameters()]


def _load_state(path: Path, opt, names: list[str]) -> dict:
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


class _Trainer:
    """One run's mutable state; ``train`` drives it and turns its work into events."""

    def __init__(self, recipe: Recipe, out, data_dir, resume: bool):
        self.recipe, self.cfg, self.paths = recipe, recipe.train, RunPaths(Path(out))
        self.device = pick_device(self.cfg.device)
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        self.step, self.epoch, self.batch_index = 0, 1, 0
        self.history: list[dict] = []
        self.best_score: float | None = None
        self.last_good: str | None = None
        self.last_saved_step = -1
        if resume:
            self._resume(data_dir)
        else:
            torch.manual_seed(self.cfg.seed)
            self.data = prepare(recipe, data_dir)
            cfg = recipe.model_config(len(self.data.src_vocab), len(self.data.tgt_vocab))
            self.model = build_model(cfg).to(self.device)
            self.opt = _optimizer(self.model, self.cfg)
        check_training(self.model.cfg, self.cfg)
        self.translator = Translator(self.model, self.data.src_vocab, self.data.tgt_vocab, recipe.src_tokenizer,
                                     recipe.tgt_tokenizer)
        # The corpus, vocabularies and model live for the whole run: take them out of the cyclic garbage
        # collector's reach, or every full collection walks them all (a 200+ ms pause that freezes a GUI's thread).
        gc.freeze()

    def _resume(self, data_dir) -> None:
        if not self.paths.state.exists() or not self.paths.last.exists():
            raise CheckpointError(f"cannot resume: {self.paths.state.name} and {self.paths.last.name} are needed next "
                                  f"to {self.paths.best}; start a new run instead.")
        last = load_translator(self.paths.last)
        self.model = last.model.to(self.device)
        self.data = prepare(self.recipe, data_dir, (last.src_vocab, last.tgt_vocab), last.config.max_positions)
        self.opt = _optimizer(self.model, self.cfg)
        meta = _load_state(self.paths.state, self.opt, _param_names(self.model))
        if meta["step"] != last.metadata.get("step"):
            raise CheckpointError(f"{self.paths.state.name} (step {meta['step']}) does not belong to "
                                  f"{self.paths.last.name} (step {last.metadata.get('step')}).")
        self.step, self.epoch, self.batch_index = meta["step"], meta["epoch"], meta["batch_index"]
        self.history, self.best_score = meta["history"], meta["best_score"]
        self.last_good, self.last_saved_step = str(self.paths.last), self.step

    def batches(self, epoch: int) -> list[list[int]]:
        lengths = [(len(s), len(t)) for s, t in self.data.train]
        return make_batches(lengths, self.cfg, seed=self.cfg.seed * 1000 + epoch)

    def save(self, path: Path, role: str, extra_meta: dict | None = None) -> CheckpointSaved:
        meta = {"name": self.recipe.name, "preset": self.recipe.name, "recipe": self.recipe.to_dict(),
                "train_config": self.cfg.to_dict(), "history": self.history, "step": self.step,
                "metrics": {"val": self.history[-1]} if self.history else {}, **(extra_meta or {})}
        self.translator.save(path, **meta)
        return CheckpointSaved(str(path), role, self.step)

    def save_resume_point(self, epoch: int, batch_index: int) -> CheckpointSaved:
        if self.last_saved_step == self.step and self.last_good:
            return CheckpointSaved(self.last_good, "last", self.step)
        saved = self.save(self.paths.last, "last")  # weights first: a state file always has its checkpoint
        _save_state(self.paths.state, self.opt, self.step, epoch, batch_index,
                    {"history": self.history, "best_score": self.best_score, "recipe": self.recipe.to_dict(),
                     "param_names": _param_names(self.model)})
        self.last_good, self.last_saved_step = saved.path, self.step
        return saved

    def evaluate(self, elapsed: float) -> EvalResult:
        stats = teacher_forced_stats(self.model, eval_batches(self.data.val), self.device)
        bleu, samples = self._translation_quality() if self.translator.has_source else (None, self._generated())
        probe = self.translator.translate(self.recipe.probe) if self.recipe.probe else None
        self.model.train()
        return EvalResult(self.step, self.epoch, stats.loss, stats.ppl, stats.accuracy, bleu, samples, probe, elapsed)

    def _translation_quality(self) -> tuple[float, tuple[tuple[str, str, str], ...]]:
        """bleu_tok on the first ``bleu_sentences`` validation pairs, and three (source, reference, output)."""
        n = self.cfg.bleu_sentences or len(self.data.val_pairs)
        hyps = self.translator.translate_batch_tokens([s for s, _ in self.data.val_pairs[:n]])
        bleu, _ = bleu_tok(hyps, self.data.val_refs[:n])
        return bleu, tuple((s, r, self.translator.detokenize(h)) for (s, r), h in zip(self.data.val_pairs[:3], hyps))

    def _generated(self) -> tuple[tuple[str, str, str], ...]:
        """A language model's samples: three sequences drawn at temperature 1 (seeded by the step)."""
        drawn = self.translator.generate("", n=3, temperature=1.0, seed=self.step)
        return tuple(("", "", t.text) for t in drawn)

    def score(self, result: EvalResult) -> float:
        """Higher is better."""
        return {"val_loss": -result.val_loss, "bleu": result.bleu, "accuracy": result.accuracy}[self.cfg.keep_metric]


def _record(result: EvalResult) -> dict:
    record = {"step": result.step, "epoch": result.epoch, "loss": result.val_loss, "ppl": result.ppl,
              "accuracy": result.accuracy, "bleu_tok": result.bleu, "seconds": round(result.elapsed_s, 1)}
    return {k: v for k, v in record.items() if v is not None}  # a language model has no BLEU


def train(recipe: Recipe, out: str | os.PathLike, data_dir=None, resume: bool = False,
          stop: threading.Event | None = None, max_steps: int = 0) -> Iterator:
    """Train ``recipe`` and write its checkpoints next to ``out``; see the module docstring for the events.

    ``max_steps`` ends the run after that many optimizer steps in total (resumed steps included).
    """
    try:
        yield from _train(_Trainer(recipe, out, data_dir, resume), max_steps, stop)
    finally:
        gc.unfreeze()  # the run's objects become collectable again (a GUI may train many runs in one process)


def _train(run: _Trainer, max_steps: int, stop: threading.Event | None) -> Iterator:
    cfg, model = run.cfg, run.model
    steps_per_epoch = len(run.batches(1))
    planned = steps_per_epoch * cfg.epochs  # what the schedule spans, even when max_steps ends the run sooner
    total = min(planned, max_steps or 1 << 62)
    yield TrainStarted(total, cfg.epochs, count_parameters(model), len(run.data.train), len(run.data.val),
                       str(run.device), run.step)
    started, window_tokens, first_step = time.perf_counter(), 0, run.step
    # rates and the ETA count only the steps' own time: a paused consumer holds a yield, and evaluations are not
    # training, so neither may make tokens/s drop or the ETA grow
    busy, window_busy = 0.0, 0.0
    model.train()
    epoch_start = run.epoch
    for epoch in range(epoch_start, cfg.epochs + 1):
        run.epoch = epoch
        batches = run.batches(epoch)
        for index in range(run.batch_index if epoch == epoch_start else 0, len(batches)):
            if (stop is not None and stop.is_set()) or (max_steps and run.step >= max_steps):
                yield run.save_resume_point(epoch, index)
                if max_steps and run.step >= max_steps:
                    yield TrainFinished(str(run.paths.best), str(run.paths.last), {})
                else:
                    yield TrainStopped(run.step, str(run.paths.last))
                return
            step_start = time.perf_counter()
            src, tgt = (t.to(run.device) for t in batch_tensors([run.data.train[i] for i in batches[index]]))
            lr = learning_rate(run.step + 1, cfg, model.cfg.d_model, planned)
            for group in run.opt.param_groups:
                group["lr"] = lr
            loss = smoothed_loss(model(src, tgt[:, :-1], cfg.teacher_forcing), tgt[:, 1:], cfg.label_smoothing)
            if not torch.isfinite(loss):
                yield TrainFailed(f"the training loss became {loss.item()} at step {run.step + 1} (learning rate "
                                  f"{lr:.3g}); training stopped. Lower the learning rate or raise the warm-up, then "
                                  "resume or start again.", run.last_good)
                return
            run.opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.clip_norm:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
            run.opt.step()
            run.step += 1
            window_tokens += int((tgt[:, 1:] != PAD_ID).sum())
            loss_value = loss.item()  # waits for the step to finish on a GPU
            now = time.perf_counter()
            busy, window_busy = busy + now - step_start, window_busy + now - step_start
            per_step = busy / max(run.step - first_step, 1)
            yield TrainStep(run.step, epoch, loss_value, lr, window_tokens / max(window_busy, 1e-9),
                            run.step / total, per_step * (total - run.step))
            if cfg.eval_every and run.step % cfg.eval_every == 0:
                yield from _evaluate_and_save(run, now - started, epoch, index + 1)
                window_tokens, window_busy = 0, 0.0
        if not cfg.eval_every:
            yield from _evaluate_and_save(run, time.perf_counter() - started, epoch + 1, 0)
            window_tokens, window_busy = 0, 0.0
        if cfg.save_epochs:
            yield run.save(run.paths.epoch(epoch), "epoch")
    yield from _average(run)
    yield TrainFinished(str(run.paths.best), str(run.paths.last), {"val": run.history[-1]} if run.history else {})


def _evaluate_and_save(run: _Trainer, elapsed: float, next_epoch: int, next_index: int) -> Iterator:
    result = run.evaluate(elapsed)
    run.history.append(_record(result))
    yield result
    score = run.score(result)
    if run.best_score is None or score > run.best_score:
        run.best_score = score
        yield run.save(run.paths.best, "best")
    yield run.save_resume_point(next_epoch, next_index)


def _average(run: _Trainer) -> Iterator:
    """Average the last N epoch snapshots; keep the average as best if validation says it is better."""
    n = run.cfg.average_last
    paths = [run.paths.epoch(e) for e in range(run.cfg.epochs - n + 1, run.cfg.epochs + 1)] if n else []
    if n < 2 or not all(p.exists() for p in paths):
        return
    states = [load_tensors(p)[1] for p in paths]
    averaged = {k: sum(s[k] for s in states) / len(states) for k in states[0]}
    run.model.load_state_dict(averaged, strict=not run.model.cfg.tie_output)
    result = run.evaluate(0.0)
    record = _record(result) | {"averaged_epochs": [p.name for p in paths]}
    yield result
    if run.score(result) > (run.best_score if run.best_score is not None else -math.inf):
        run.best_score = run.score(result)
        run.history.append(record)
        yield run.save(run.paths.best, "average")
    else:
        run.history.append(record | {"kept": False})
