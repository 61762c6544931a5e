"""The training loop: it learns, it resumes exactly, it fails safely, and its schedule and loss are right."""

import dataclasses
import math
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

from attnviz.engine.checkpoints.store import read_header
from attnviz.engine.config import TrainConfig
from attnviz.engine.corpus.reader import CorpusSpec
from attnviz.engine.events import CheckpointSaved, EvalResult, TrainFailed, TrainFinished, TrainStep, TrainStopped
from attnviz.engine.loading import load_translator
from attnviz.engine.metrics import smoothed_loss
from attnviz.engine.text.tokenize import TokenizerSpec
from attnviz.engine.training.loop import train
from attnviz.engine.training.presets import Recipe, get_preset
from attnviz.engine.training.schedule import learning_rate

TINY_MODEL = {"model.d_model": "32", "model.ff_dim": "64", "model.heads": "4", "model.enc_layers": "1",
              "model.dec_layers": "1", "model.max_positions": "64"}


def tiny_multi30k(limit: int = 600, **train_settings) -> Recipe:
    settings = TINY_MODEL | {"corpus.limit": str(limit), "train.batch_size": "32", "train.bleu_sentences": "20",
                             "train.lr": "2e-3"}
    return get_preset("multi30k-de-en").override(settings | {f"train.{k}": str(v) for k, v in train_settings.items()})


def events_of(recipe, out, data_dir, **kwargs):
    return list(train(recipe, out, data_dir, **kwargs))


def test_noam_and_inverse_sqrt_schedules_match_hand_computed_values():
    noam = TrainConfig(lr=1.0, schedule="noam", warmup=4000)
    assert learning_rate(1, noam, 128) == pytest.approx(128 ** -0.5 * 1 * 4000 ** -1.5)
    assert learning_rate(4000, noam, 128) == pytest.approx(128 ** -0.5 * 4000 ** -0.5)
    assert learning_rate(16000, noam, 128) == pytest.approx(0.0884 * 16000 ** -0.5, rel=1e-3)
    inv = TrainConfig(lr=1e-3, schedule="inverse_sqrt", warmup=100)
    assert [learning_rate(s, inv, 256) for s in (50, 100, 400)] == pytest.approx([5e-4, 1e-3, 5e-4])
    assert learning_rate(7, TrainConfig(lr=5e-4), 256) == 5e-4


def test_label_smoothing_matches_hand_computed_value():
    logits = torch.tensor([[[2.0, 0.0, 1.0, 0.0]]])  # one token, four classes; gold class 0
    gold = torch.tensor([[0]])
    logp = logits.log_softmax(-1)[0, 0]
    expected = -(0.9 * logp[0] + 0.1 * logp.mean())  # (1 - eps) * nll + eps * mean over all classes
    assert smoothed_loss(logits, gold, 0.1).item() == pytest.approx(expected.item(), rel=1e-6)
    pad_only = torch.tensor([[1]])
    assert torch.isnan(smoothed_loss(logits, pad_only, 0.0))  # all-pad batches are never formed by batching


@pytest.mark.data
def test_tiny_model_on_real_multi30k_lowers_its_loss(data_dir, tmp_path):
    events = events_of(tiny_multi30k(epochs=2), tmp_path / "m.safetensors", data_dir)
    losses = [e.loss for e in events if isinstance(e, TrainStep)]
    evals = [e for e in events if isinstance(e, EvalResult)]
    assert len(losses) == 2 * math.ceil(600 / 32)
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 1.0
    assert len(evals) == 2 and evals[1].record.loss < evals[0].record.loss
    assert evals[0].probe is not None and evals[0].probe.attention["cross"].shape[:2] == (1, 4)
    assert len(evals[0].samples) == 3 and all(s.source and s.reference for s in evals[0].samples)
    assert isinstance(events[-1], TrainFinished)
    best = load_translator(tmp_path / "m.safetensors")
    assert best.info["preset"] == "multi30k-de-en" and best.info["metrics"]["val"]["loss"] == pytest.approx(
        min(e.record.loss for e in evals))
    assert [r.to_dict() for r in best.card.history] == best.info["history"]  # the typed history is what is stored
    assert best.card.history[-1].step == evals[-1].record.step


def overfit_recipe(tmp_path, pairs) -> Recipe:
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    corpus = CorpusSpec("files", "de", "en", paths={"train": [str(tsv)], "val": [str(tsv)]})
    ws = TokenizerSpec("de", mode="whitespace")
    return Recipe("overfit", "64 pairs", corpus, ws, TokenizerSpec("en", mode="whitespace"), 1,
                  dict(d_model=64, ff_dim=128, heads=4, enc_layers=2, dec_layers=2, dropout=0.0, max_positions=32),
                  TrainConfig(epochs=120, batch_size=64, lr=3e-3, eval_every=120, bleu_sentences=16))


def test_overfits_64_pairs_to_95_percent_token_accuracy(tmp_path):
    import random

    rng = random.Random(5)
    words = [f"wort{i}" for i in range(40)]
    pairs = []
    for _ in range(64):
        src = rng.sample(words, rng.randint(3, 7))
        pairs.append((" ".join(src), " ".join(w.replace("wort", "word") for w in sorted(src))))
    events = events_of(overfit_recipe(tmp_path, pairs), tmp_path / "o.safetensors", None)
    final = [e for e in events if isinstance(e, EvalResult)][-1]
    assert final.record.accuracy >= 0.95, final.record.accuracy


def test_resuming_equals_training_straight_through(tmp_path):
    pairs = [(f"a{i} b{i % 5} c{i % 3}", f"x{i % 7} y{i % 5}") for i in range(90)]
    recipe = overfit_recipe(tmp_path, pairs).override({"train.batch_size": "16", "model.dropout": "0.3",
                                                       "train.eval_every": "0", "train.epochs": "3"})
    straight = [e.loss for e in events_of(recipe, tmp_path / "a.safetensors", None, max_steps=10)
                if isinstance(e, TrainStep)]
    first = events_of(recipe, tmp_path / "b.safetensors", None, max_steps=5)
    assert isinstance(first[-1], TrainFinished)
    # 5 steps of a 6-step epoch: no evaluation yet, so no best checkpoint is named (nor written)
    assert first[-1].best_path is None and not (tmp_path / "b.safetensors").exists()
    assert first[-1].last_path == str(tmp_path / "b.last.safetensors")
    second = events_of(recipe, tmp_path / "b.safetensors", None, resume=True, max_steps=10)
    resumed = [e.loss for e in first + second if isinstance(e, TrainStep)]
    assert len(straight) == 10 and resumed == straight  # same batches, same dropout masks, same Adam state
    a, b = load_translator(tmp_path / "a.last.safetensors"), load_translator(tmp_path / "b.last.safetensors")
    for name, tensor in a.model.state_dict().items():
        assert torch.equal(tensor, b.model.state_dict()[name]), name


def test_stop_flag_saves_a_resumable_checkpoint(tmp_path):
    pairs = [(f"a{i} b{i % 5}", f"x{i % 7}") for i in range(64)]
    recipe = overfit_recipe(tmp_path, pairs).override({"train.batch_size": "8"})
    stop = threading.Event()
    events = []
    for event in train(recipe, tmp_path / "s.safetensors", None, stop=stop):
        events.append(event)
        if isinstance(event, TrainStep) and event.step == 3:
            stop.set()
    assert isinstance(events[-1], TrainStopped) and events[-1].step == 3
    assert any(isinstance(e, CheckpointSaved) and e.role == "last" for e in events)
    meta, _ = read_header(tmp_path / "s.state.safetensors")
    assert (meta["step"], meta["epoch"], meta["batch_index"]) == (3, 1, 3)


@pytest.mark.parametrize("eval_every", [4, 0])  # every 4 steps; at each epoch's end (64 pairs of 8: 8 steps)
def test_a_stop_during_the_step_before_an_evaluation_skips_it_and_resuming_does_it(tmp_path, eval_every):
    """An evaluation takes minutes on a real corpus: a Stop pressed during the step before one must not wait for it
    (the docs promise seconds). The skipped evaluation is done on resume, before the next step."""
    pairs = [(f"a{i} b{i % 5}", f"x{i % 7}") for i in range(64)]
    recipe = overfit_recipe(tmp_path, pairs).override({"train.batch_size": "8", "train.eval_every": str(eval_every),
                                                       "train.epochs": "2"})
    stop, events = threading.Event(), []
    steps_per_epoch = None
    for event in train(recipe, tmp_path / "s.safetensors", None, stop=stop):
        events.append(event)
        if type(event).__name__ == "TrainStarted":
            steps_per_epoch = event.total_steps // 2
        if isinstance(event, TrainStep) and event.step == (eval_every or steps_per_epoch):
            stop.set()  # during the step, before the evaluation that would follow it
    assert isinstance(events[-1], TrainStopped) and events[-1].step == (eval_every or steps_per_epoch)
    assert not [e for e in events if isinstance(e, EvalResult)]
    resumed = events_of(recipe, tmp_path / "s.safetensors", None, resume=True, max_steps=steps_per_epoch + 1)
    work = [e for e in resumed if isinstance(e, (EvalResult, TrainStep))]
    assert isinstance(work[0], EvalResult) and isinstance(work[1], TrainStep)  # the skipped evaluation first
    assert work[1].step == (eval_every or steps_per_epoch) + 1


def test_a_nan_loss_stops_with_a_message_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    pairs = [(f"a{i}", f"x{i}") for i in range(32)]
    recipe = overfit_recipe(tmp_path, pairs).override({"train.batch_size": "8", "train.eval_every": "2"})
    import attnviz.engine.training.loop as training

    real = training.smoothed_loss
    calls = {"n": 0}

    def poisoned(*args):
        calls["n"] += 1
        return real(*args) * (float("nan") if calls["n"] == 5 else 1.0)

    monkeypatch.setattr(training, "smoothed_loss", poisoned)
    events = events_of(recipe, tmp_path / "n.safetensors", None)
    failure = events[-1]
    assert isinstance(failure, TrainFailed) and "nan at step 5" in failure.message
    assert failure.last_good == str(tmp_path / "n.last.safetensors")
    assert load_translator(failure.last_good).metadata["step"] == 4


def test_unknown_preset_and_bad_override_are_refused():
    from attnviz.engine.errors import ConfigError

    with pytest.raises(ConfigError, match="available: multi30k-de-en"):
        get_preset("wmt14")
    with pytest.raises(ConfigError, match="heads"):
        get_preset("multi30k-de-en").override({"model.heads": "7"})
    with pytest.raises(ConfigError, match="unknown setting 'train.speed'"):
        get_preset("multi30k-de-en").override({"train.speed": "2"})


KILL_SCRIPT = """
import sys
from attnviz.engine.training.presets import Recipe
from attnviz.engine.training.loop import train
import json
recipe = Recipe.from_dict(json.loads(sys.argv[1]))
for event in train(recipe, sys.argv[2], None):
    print(type(event).__name__, flush=True)
"""


def test_sigkill_during_training_never_corrupts_checkpoints(tmp_path):
    import json

    pairs = [(f"a{i} b{i % 5} c{i % 4}", f"x{i % 7} y{i % 3}") for i in range(200)]
    recipe = overfit_recipe(tmp_path, pairs).override({"train.batch_size": "8", "train.eval_every": "3",
                                                       "train.epochs": "50"})
    out = tmp_path / "k.safetensors"
    for delay in (2.5, 3.5, 4.5):
        proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, json.dumps(recipe.to_dict()), str(out)],
                                stdout=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while not out.exists() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(delay - 2.5 + 0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        for path in (out, tmp_path / "k.last.safetensors"):
            assert load_translator(path).translate("a1 b1").tokens  # every file on disk is whole
        leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        for name in leftovers:  # a killed save may leave its temporary file, never a damaged target
            (tmp_path / name).unlink()


def test_release_stores_measured_metrics_and_picks_float16_only_when_lossless(tmp_path):
    from attnviz.engine.training.release import release

    pairs = [(f"a{i % 9} b{i % 5} c{i % 4}", f"x{i % 9} y{i % 5} z{i % 4}") for i in range(64)]
    recipe = overfit_recipe(tmp_path, pairs).override({"train.epochs": "40", "train.eval_every": "40"})
    events_of(recipe, tmp_path / "r.safetensors", None)
    metrics = release(tmp_path / "r.safetensors", tmp_path / "bundle.safetensors", name="tiny", beam=3)
    assert {"val", "val_beam3", "float16_check"} <= set(metrics)
    check = metrics["float16_check"]
    assert check["stored_as_float16"] == (abs(check["bleu_tok_float16"] - check["bleu_tok_float32"]) <= 0.1)
    bundled = load_translator(tmp_path / "bundle.safetensors")
    assert bundled.info["name"] == "tiny" and bundled.info["metrics"]["val"]["bleu_tok"] == metrics["val"]["bleu_tok"]
    assert bundled.info["dtype"] == ("float16" if check["stored_as_float16"] else "float32")


class _SteppedClock:
    """The training loop's ``time``: every reading advances 10 ms, and ``pause`` adds what a held generator would;
    so the test reads figures that do not depend on how busy the machine is."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 0.01
        return self.now

    def pause(self, seconds: float) -> None:
        self.now += seconds


def test_tokens_per_second_and_eta_leave_out_pauses(tmp_path, monkeypatch):
    """A consumer that holds the generator (the GUI's Pause) must not lower tokens/s or raise the ETA."""
    from attnviz.engine.training import loop

    clock = _SteppedClock()
    monkeypatch.setattr(loop, "time", clock)
    pairs = [(f"a{i} b{i % 5}", f"x{i % 7}") for i in range(64)]
    recipe = overfit_recipe(tmp_path, pairs).override({"train.batch_size": "8", "train.epochs": "2"})
    steps = []
    for event in train(recipe, tmp_path / "p.safetensors", None, max_steps=8):
        if isinstance(event, TrainStep):
            steps.append(event)
            if event.step == 4:
                clock.pause(1000.0)  # paused for far longer than a step takes
    before, after = steps[3], steps[4]
    assert after.eta_s == pytest.approx(before.eta_s - 0.01)  # one step fewer left, each step timed at 10 ms
    assert after.tokens_per_s > 0.3 * before.tokens_per_s  # the window's busy time leaves out the pause


def test_resuming_restores_the_loss_curve_evaluations_and_forming_snapshots(tmp_path):
    """What the views showed before a stop comes back on resume (TrainHistory), before the first new step."""
    from attnviz.engine.events import EvalStarted, TrainHistory

    pairs = [(f"a{i} b{i % 5} c{i % 3}", f"x{i % 7} y{i % 5}") for i in range(90)]
    recipe = dataclasses.replace(overfit_recipe(tmp_path, pairs).override(
        {"train.batch_size": "16", "train.eval_every": "3", "train.epochs": "3"}), probe="a1 b1 c1")
    first = events_of(recipe, tmp_path / "r.safetensors", None, max_steps=7)
    steps = [e for e in first if isinstance(e, TrainStep)]
    evals = [e for e in first if isinstance(e, EvalResult)]
    started = [i for i, e in enumerate(first) if isinstance(e, EvalStarted)]
    assert [first[i + 1].record.step for i in started] == [3, 6]  # each evaluation is announced, then reported
    assert all(first[i].sentences == 16 and first[i].step == s for i, s in zip(started, (3, 6), strict=True))
    assert (tmp_path / "r.views.npz").exists()
    second = events_of(recipe, tmp_path / "r.safetensors", None, resume=True, max_steps=9)
    history = next(e for e in second if isinstance(e, TrainHistory))
    assert second.index(history) < min(i for i, e in enumerate(second) if isinstance(e, TrainStep))
    assert [(s.step, s.loss, s.lr) for s in history.steps] == [(s.step, s.loss, s.lr) for s in steps]
    assert [e.record.to_dict() for e in history.evaluations] == [e.record.to_dict() for e in evals]
    assert [e.samples for e in history.evaluations] == [e.samples for e in evals]
    for restored, shown in zip(history.evaluations, evals, strict=True):
        assert restored.probe.tokens == shown.probe.tokens and restored.probe.src_tokens == shown.probe.src_tokens
        assert np.array_equal(restored.probe.attention["cross"], shown.probe.attention["cross"].astype(np.float32))
    third = events_of(recipe, tmp_path / "r.safetensors", None, resume=True, max_steps=12)
    again = next(e for e in third if isinstance(e, TrainHistory))
    assert [s.step for s in again.steps] == list(range(1, 10)) and len(again.evaluations) == 3


def test_a_run_without_a_views_file_resumes_with_its_evaluations_and_a_note(tmp_path):
    from attnviz.engine.events import TrainHistory, TrainNote

    pairs = [(f"a{i} b{i % 5}", f"x{i % 7}") for i in range(48)]
    recipe = overfit_recipe(tmp_path, pairs).override({"train.batch_size": "16", "train.eval_every": "2"})
    events_of(recipe, tmp_path / "o.safetensors", None, max_steps=3)
    (tmp_path / "o.views.npz").write_bytes(b"not an npz")
    resumed = events_of(recipe, tmp_path / "o.safetensors", None, resume=True, max_steps=4)
    history = next(e for e in resumed if isinstance(e, TrainHistory))
    assert history.steps == () and [e.record.step for e in history.evaluations] == [2]
    note = next(e.message for e in resumed if isinstance(e, TrainNote))
    assert note.startswith("the loss curve and the attention-forming strip start at step 3") and "o.views.npz" in note


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def _meta(value) -> np.ndarray:
    return np.frombuffer(value.encode("utf-8"), dtype=np.uint8)


@pytest.mark.parametrize("arrays", [
    {"meta": _meta('["a list"]'), "steps": np.zeros((0, 5))},
    {"meta": _meta("[" * 100_000 + "]" * 100_000), "steps": np.zeros((0, 5))},
    {"meta": _meta('{"format": "other"}'), "steps": np.zeros((0, 5))},
    {"meta": _meta('{"format": "attnviz run views 1", "evaluations": [7]}'), "steps": np.zeros((0, 5))},
    {"meta": _meta('{"format": "attnviz run views 1", "evaluations": []}'), "steps": np.zeros(3)},
    {"meta": np.frombuffer(b"\xff\xfe", dtype=np.uint8), "steps": np.zeros((0, 5))},
    {"steps": np.zeros((0, 5))},
], ids=["meta-list", "meta-deep", "other-format", "entry-not-object", "steps-1d", "meta-not-utf8", "no-meta"])
def test_a_hostile_views_file_is_refused_with_its_name(tmp_path, arrays):
    """A views file copied from elsewhere may hold anything: one ValueError naming it, never another exception."""
    from attnviz.engine.training.views_file import FORMAT, read_views

    assert FORMAT == "attnviz run views 1"  # the cases above name it
    path = _npz(tmp_path / "x.views.npz", **arrays)
    with pytest.raises(ValueError, match=r"^x\.views\.npz "):
        read_views(path, 10)


def test_a_warmup_longer_than_the_run_is_flagged_before_the_first_step(tmp_path):
    from attnviz.engine.events import TrainNote, TrainStarted
    from attnviz.engine.training.schedule import warmup_warning

    assert warmup_warning(TrainConfig(schedule="noam", warmup=4000), 34) == (
        "train.warmup is 4,000 steps but the whole run is 34 steps: the learning rate is still warming up when "
        "training ends (it reaches 1% of its peak), so the model will barely learn. Lower train.warmup (e.g. to 3) "
        "or train more epochs.")
    assert warmup_warning(TrainConfig(schedule="noam", warmup=30), 34) is None
    assert warmup_warning(TrainConfig(schedule="constant", warmup=4000), 34) is None
    pairs = [(f"a{i} b{i % 5}", f"x{i % 7}") for i in range(32)]
    recipe = overfit_recipe(tmp_path, pairs).override({"train.batch_size": "16", "train.schedule": "noam",
                                                       "train.warmup": "500", "train.epochs": "2"})
    events = events_of(recipe, tmp_path / "w.safetensors", None, max_steps=1)
    warning = next(i for i, e in enumerate(events) if isinstance(e, TrainNote) and e.warning)
    assert isinstance(events[warning - 1], TrainStarted) and "whole run is 4 steps" in events[warning].message
