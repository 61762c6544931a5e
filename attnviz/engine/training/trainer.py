"""One training run's state and what it does between steps: set up or resume (corpus, vocabularies, model,
optimizer, history), save checkpoints and resume points, evaluate (validation loss, BLEU on a sample, the probe
sentence's attention) and score an evaluation by the recipe's metric. ``engine.training.loop`` runs the steps and
turns this work into events.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import torch

from attnviz.engine.config import DecodeConfig, TrainConfig
from attnviz.engine.corpus.batching import eval_batches, make_batches
from attnviz.engine.errors import CheckpointError
from attnviz.engine.events import CheckpointSaved, EvalResult, EvalStarted, Sample, TrainHistory
from attnviz.engine.kinds import check_training
from attnviz.engine.metrics import bleu_tok, teacher_forced_stats
from attnviz.engine.records import EvalRecord
from attnviz.engine.training.distributed import Ranks
from attnviz.engine.training.prepare import prepare
from attnviz.engine.training.presets import Recipe
from attnviz.engine.training.resume_point import SaveError, restore_last, save_failed
from attnviz.engine.training.runs import RESUME_AT, RunPaths, remove_stale_temps, run_checkpoint, saved_checkpoint
from attnviz.engine.training.state import load_state, param_names, save_state
from attnviz.engine.training.views_file import restored_history, save_views, step_row
from attnviz.engine.translator import Translator, build_model, load_checkpoint


def _optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Adam:
    return torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps,
                            weight_decay=cfg.weight_decay)


class Trainer:
    """One run's mutable state: its data, model, optimizer and history, how it resumes, saves and evaluates;
    ``engine.training.loop.train`` drives it and turns its work into events."""

    def __init__(self, recipe: Recipe, out, data_dir, resume: bool, ranks: Ranks, device: torch.device,
                 stop: threading.Event | None = None):
        # resuming from any file of a run (its .last or .state too) continues that run and writes its own files
        self.recipe, self.cfg, self.dist, self.device = recipe, recipe.train, ranks, device
        self.paths = RunPaths(run_checkpoint(out) if resume else Path(out))
        self.notes = [f"removed {name}, left behind by a save that was cut short" for name in
                      (remove_stale_temps(self.paths) if ranks.is_main else ())]
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        self.amp = self.cfg.precision == "bf16" and device.type == "cuda"
        if self.cfg.precision == "bf16" and not self.amp:
            self.notes.append(f"precision bf16 needs a CUDA GPU; this run on {device} trains in fp32")
        self.step, self.epoch, self.batch_index = 0, 1, 0
        self.history: list[EvalRecord] = []
        self.shown = TrainHistory((), ())  # what a resumed run's views showed before (see views_file)
        self.curve: list[tuple[float, ...]] = []  # every step's figures, and every evaluation: what the views show
        self.evaluations: list[EvalResult] = []
        self.best_score: float | None = None
        self.last_good: str | None = None
        self.last_saved_step = -1
        self.stop = stop  # read while the data is prepared (PreparationStopped)
        if resume:
            self._resume(data_dir)
        else:
            torch.manual_seed(self.cfg.seed)  # the same initial weights on every rank
            self.data = prepare(recipe, data_dir, stop=stop)
            cfg = recipe.model_config(len(self.data.src_vocab), len(self.data.tgt_vocab))
            self.model = build_model(cfg).to(self.device)
            self.opt = _optimizer(self.model, self.cfg)
        if ranks.rank:  # other dropout masks than rank 0's
            torch.manual_seed(self.cfg.seed + 1_000_003 * ranks.rank + self.step)
        self.forward = ranks.wrap(self.model)  # what a step calls; evaluation and checkpoints use the model itself
        self.translator = Translator(self.model, self.data.src_vocab, self.data.tgt_vocab, self.data.src_spec,
                                     self.data.tgt_spec)
        check_training(self.translator.config, self.cfg)
        # The corpus, vocabularies and model live for the whole run: take them out of the cyclic garbage
        # collector's reach, or every full collection walks them all (a 200+ ms pause that freezes a GUI's thread).
        gc.freeze()

    def _resume(self, data_dir) -> None:
        found = saved_checkpoint(self.paths) if not self.paths.state.exists() else None
        if found is not None:
            self._resume_from_checkpoint(found[0], data_dir)
            return
        repaired = restore_last(self.paths) if self.dist.is_main else None
        if repaired:
            self.notes.append(repaired)
        self.dist.agree(False)  # the other ranks read .last once rank 0 has repaired it
        last = load_checkpoint(self.paths.last)
        self.model = last.model.to(self.device)
        self.data = prepare(self.recipe, data_dir, (last.src_vocab, last.tgt_vocab), last.config.max_positions,
                            (last.src_spec, last.tgt_spec), self.stop)
        self.opt = _optimizer(self.model, self.cfg)
        meta = load_state(self.paths.state, self.opt, param_names(self.model))
        if meta["step"] != last.metadata.get("step"):
            raise CheckpointError(f"{self.paths.state.name} (step {meta['step']}) does not belong to "
                                  f"{self.paths.last.name} (step {last.metadata.get('step')}).")
        self.step, self.epoch, self.batch_index = meta["step"], meta["epoch"], meta["batch_index"]
        self.history = [EvalRecord.from_dict(r) for r in meta["history"]]
        self.shown, note = restored_history(self.paths.views, self.step, self.history)
        self.curve = [step_row(s) for s in self.shown.steps]
        self.evaluations = list(self.shown.evaluations)
        if note:
            self.notes.append(note)
        self.best_score = meta["best_score"]
        self.last_good, self.last_saved_step = str(self.paths.last), self.step

    def _resume_from_checkpoint(self, path: Path, data_dir) -> None:
        """Resume from a checkpoint alone (``runs.saved_checkpoint``): its weights, step, position and history; the
        optimizer's moments and the random state were never saved, so they start afresh (said in a note)."""
        saved = load_checkpoint(path)
        self.model = saved.model.to(self.device)
        self.data = prepare(self.recipe, data_dir, (saved.src_vocab, saved.tgt_vocab), saved.config.max_positions,
                            (saved.src_spec, saved.tgt_spec), self.stop)
        self.opt = _optimizer(self.model, self.cfg)
        meta = saved.metadata
        self.step, (self.epoch, self.batch_index) = meta["step"], meta[RESUME_AT]
        self.history = [EvalRecord.from_dict(r) for r in meta.get("history", [])]
        self.best_score = max((self.score(r) for r in self.history), default=None)
        self.notes.append(f"the training state of this run was never saved (its first save was cut short); resumed "
                          f"from {path.name} at step {self.step}, with the optimizer started afresh")
        torch.manual_seed(self.cfg.seed + self.step)

    def batches(self, epoch: int) -> list[list[int]]:
        lengths = [(len(s), len(t)) for s, t in self.data.train]
        return make_batches(lengths, self.cfg, seed=self.cfg.seed * 1000 + epoch)

    def save(self, path: Path, role: str, extra_meta: dict | None = None) -> CheckpointSaved:
        meta = self.checkpoint_meta() | (extra_meta or {})
        try:
            self.translator.save(path, **meta)
        except OSError as exc:
            raise save_failed(path, exc) from None
        return CheckpointSaved(str(path), role, self.step)

    def checkpoint_meta(self) -> dict:
        return {"name": self.recipe.name, "preset": self.recipe.name, "recipe": self.recipe.to_dict(),
                "train_config": self.cfg.to_dict(), "history": self._history_dicts(), "step": self.step,
                "metrics": {"val": self.history[-1].to_dict()} if self.history else {}}

    def _history_dicts(self) -> list[dict]:
        return [r.to_dict() for r in self.history]

    def save_resume_point(self, epoch: int, batch_index: int) -> CheckpointSaved:
        if self.last_saved_step == self.step and self.last_good:
            return CheckpointSaved(self.last_good, "last", self.step)
        # the state file holds the weights and .last's metadata too, and is written first: it alone is a whole
        # resume point, and a cut between the two files is repaired on resume (see engine.training.resume_point)
        weights, last_meta = self.translator.checkpoint_parts(**self.checkpoint_meta(),
                                                              **{RESUME_AT: [epoch, batch_index]})
        try:  # the views' history first: it is never behind the resume point (later entries are dropped on resume)
            save_views(self.paths.views, self.curve, self.evaluations)
            save_state(self.paths.state, self.opt, self.step, epoch, batch_index,
                        {"history": self._history_dicts(), "best_score": self.best_score,
                         "recipe": self.recipe.to_dict(), "param_names": param_names(self.model),
                         "checkpoint": last_meta}, weights)
        except OSError as exc:
            raise save_failed(Path(exc.filename or self.paths.state), exc) from None
        try:
            saved = self.save(self.paths.last, "last", {RESUME_AT: [epoch, batch_index]})
        except SaveError as exc:  # the state file alone is a whole resume point: say so, and name it
            self.last_good = str(self.paths.state)
            raise SaveError(f"{exc} The training state of step {self.step} was saved, so resuming continues from "
                            "there.") from None
        self.last_good, self.last_saved_step = saved.path, self.step
        return saved

    def eval_started(self) -> EvalStarted:
        translated = (self.cfg.bleu_sentences or len(self.data.val_pairs)) if self.translator.has_source else 0
        return EvalStarted(self.step, min(translated, len(self.data.val_pairs)))

    def evaluate(self, elapsed: float) -> EvalResult:
        stats = teacher_forced_stats(self.model, eval_batches(self.data.val), self.device)
        bleu, samples = self._translation_quality() if self.translator.has_source else (None, self._generated())
        probe = self.translator.translate(self.recipe.probe) if self.recipe.probe else None
        self.model.train()
        record = EvalRecord(self.step, self.epoch, stats.loss, stats.ppl, stats.accuracy, bleu, elapsed)
        return EvalResult(record, samples, probe)

    def _translation_quality(self) -> tuple[float, tuple[Sample, ...]]:
        """bleu_tok on the first ``bleu_sentences`` validation pairs, and three (source, reference, output)."""
        n = self.cfg.bleu_sentences or len(self.data.val_pairs)
        hyps = self.translator.translate_batch_tokens([s for s, _ in self.data.val_pairs[:n]])
        bleu, _ = bleu_tok([self.data.tgt_spec.scored_words(h) for h in hyps], self.data.val_refs[:n])
        return bleu, tuple(Sample(self.translator.detokenize(h), s, r)
                           for (s, r), h in zip(self.data.val_pairs[:3], hyps))

    def _generated(self) -> tuple[Sample, ...]:
        """A language model's samples: three sequences drawn at temperature 1 (seeded by the step)."""
        drawn = self.translator.generate("", n=3, decode=DecodeConfig(temperature=1.0, seed=self.step))
        return tuple(Sample(t.text) for t in drawn)

    def score(self, record: EvalRecord) -> float:
        """Higher is better."""
        score = {"val_loss": -record.loss, "bleu": record.bleu, "accuracy": record.accuracy}[self.cfg.keep_metric]
        assert score is not None, "check_training keeps bleu for translation models, whose evaluations measure it"
        return score
