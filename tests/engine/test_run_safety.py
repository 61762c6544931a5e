"""Nothing of a run is lost: kills at every point of every save, a full disk, the end of a run, resuming from any of
a run's files, unusable data and a diverging loss."""

import errno
import json
import os
import signal
import subprocess
import sys

import pytest
import torch

from attnviz.engine.checkpoints.store import read_header
from attnviz.engine.errors import CheckpointError, DataError
from attnviz.engine.events import TrainFailed, TrainFinished, TrainNote, TrainStep
from attnviz.engine.loading import load_translator
from attnviz.engine.training.divergence import DivergenceWatch
from attnviz.engine.training.loop import train
from tests.engine.test_training import overfit_recipe

PAIRS = [(f"a{i} b{i % 5} c{i % 3}", f"x{i % 7} y{i % 5}") for i in range(48)]


def small_recipe(tmp_path, **train_settings):
    settings = {"train.batch_size": "8", "model.dropout": "0.3", "train.eval_every": "2", "train.epochs": "1",
                "train.bleu_sentences": "4", "model.d_model": "16", "model.ff_dim": "32", "model.enc_layers": "1",
                "model.dec_layers": "1"}
    return overfit_recipe(tmp_path, PAIRS).override(settings | {f"train.{k}": str(v) for k, v in
                                                                train_settings.items()})


def weights(path):
    return load_translator(path).model.state_dict()


def same_weights(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


class Killed(BaseException):
    """Stands for SIGKILL inside the process: nothing after the injected point runs."""


def inject(monkeypatch, k: int, counter: dict) -> None:
    """Make the k-th call of os.fsync / os.replace (the steps of every atomic save) end the "process"."""
    for name in ("fsync", "replace"):
        real = getattr(os, name)

        def fault(*args, _real=real):
            counter["n"] += 1
            if counter["n"] == k:
                raise Killed
            return _real(*args)

        monkeypatch.setattr(os, name, fault)


def test_a_kill_at_any_point_of_any_save_leaves_a_run_that_resumes_to_the_same_model(tmp_path, monkeypatch):
    recipe = small_recipe(tmp_path)
    reference = tmp_path / "ref" / "r.safetensors"
    counter = {"n": 0}
    inject(monkeypatch, -1, counter)
    events = list(train(recipe, reference, None))
    monkeypatch.undo()
    assert isinstance(events[-1], TrainFinished)
    points, final = counter["n"], weights(reference.with_suffix(".last.safetensors"))
    assert points >= 20  # several saves of three steps each: every one of them is a kill point below
    outcomes = set()
    for k in range(1, points + 1):
        out = tmp_path / f"k{k}" / "r.safetensors"
        counter["n"] = 0
        inject(monkeypatch, k, counter)
        with pytest.raises(Killed):
            list(train(recipe, out, None))
        monkeypatch.undo()
        try:
            resumed = list(train(recipe, out, None, resume=True))
        except CheckpointError as exc:  # killed before a first checkpoint was whole: nothing to resume, it says so
            assert "nothing of this run was saved yet" in str(exc)
            outcomes.add("nothing saved")
            resumed = list(train(recipe, out, None))
        outcomes.update("repaired" for e in resumed if isinstance(e, TrainNote) and "rebuilt" in e.message)
        fresh = [e for e in resumed if isinstance(e, TrainNote) and "was never saved" in e.message]
        assert isinstance(resumed[-1], TrainFinished), (k, resumed[-1])
        if fresh:  # the first save sequence cut after the best file: resumed from it, the optimizer started afresh
            outcomes.add("from the best file")
            assert fresh[0].message == ("the training state of this run was never saved (its first save was cut "
                                        "short); resumed from r.safetensors at step 2, with the optimizer started "
                                        "afresh")
            assert read_header(out.with_suffix(".last.safetensors"))[0]["step"] == 6
        else:
            assert same_weights(weights(out.with_suffix(".last.safetensors")), final), k
        assert not [p.name for p in out.parent.iterdir() if p.name.endswith(".tmp")], k
    assert outcomes == {"nothing saved", "from the best file", "repaired"}  # every kind of cut, each recovered


KILL_INSIDE_SAVE = """
import os, sys, json
from attnviz.engine.training.presets import Recipe
from attnviz.engine.training.loop import train
real, calls = os.replace, {"n": 0}
def replace(*args):
    calls["n"] += 1
    if calls["n"] == int(sys.argv[3]):
        os.kill(os.getpid(), 9)  # a real kill: the temporary file stays behind
    return real(*args)
os.replace = replace
for event in train(Recipe.from_dict(json.loads(sys.argv[1])), sys.argv[2], None):
    pass
"""


def test_a_real_sigkill_inside_a_save_leaves_no_tmp_after_resuming(tmp_path):
    recipe = small_recipe(tmp_path)
    out = tmp_path / "s.safetensors"
    proc = subprocess.run([sys.executable, "-c", KILL_INSIDE_SAVE, json.dumps(recipe.to_dict()), str(out), "4"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # what a kill leaves
    events = list(train(recipe, out, None, resume=True))
    assert any(isinstance(e, TrainNote) and "left behind" in e.message for e in events)
    assert isinstance(events[-1], TrainFinished)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_the_end_of_a_run_always_saves(tmp_path):
    recipe = small_recipe(tmp_path, eval_every=4)  # 6 steps: evaluations at 4, and the end at 6 must be kept
    events = list(train(recipe, tmp_path / "e.safetensors", None))
    steps = [e.step for e in events if isinstance(e, TrainStep)]
    assert steps[-1] == 6
    assert read_header(tmp_path / "e.last.safetensors")[0]["step"] == 6
    assert read_header(tmp_path / "e.state.safetensors")[0]["step"] == 6
    assert isinstance(events[-1], TrainFinished)


@pytest.mark.parametrize("given", ["e.state.safetensors", "e.last.safetensors", "e.safetensors"])
def test_resume_from_any_file_of_a_run_continues_it_and_never_overwrites_that_file(tmp_path, monkeypatch, capsys,
                                                                                   given):
    from attnviz.cli.main import main

    recipe = small_recipe(tmp_path, epochs=2)
    list(train(recipe, tmp_path / "e.safetensors", None, max_steps=3))
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # keep pytest's own Ctrl+C handling
    assert main(["train", "--resume", str(tmp_path / given)]) == 0
    assert "finished: best " + str(tmp_path / "e.safetensors") in capsys.readouterr().out
    assert read_header(tmp_path / "e.state.safetensors")[0]["kind"] == "training-state"
    assert read_header(tmp_path / "e.last.safetensors")[0]["step"] == 12
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".safetensors") == [
        "e.last.safetensors", "e.safetensors", "e.state.safetensors"]


class FullDisk:
    """A file object whose writes fail as on a full disk."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def write(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self.f, name)


def test_a_full_disk_is_one_line_naming_the_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    from attnviz.cli.main import main

    recipe = small_recipe(tmp_path, epochs=2)
    list(train(recipe, tmp_path / "d.safetensors", None, max_steps=4))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.suffix == ".safetensors"}
    real = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, mode="r", *a, **k: FullDisk(real(fd, mode, *a, **k))
                        if "w" in mode else real(fd, mode, *a, **k))
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    assert main(["train", "--resume", str(tmp_path / "d.safetensors")]) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("attnviz: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err  # the progress line may come before it
    err = errors[0]
    assert "No space left on device" in err and "disk is full" in err
    assert f"Last good checkpoint: {tmp_path / 'd.last.safetensors'}" in err
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.suffix == ".safetensors"}
    assert after == before and not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def files_recipe(tmp_path, train_lines: bytes, val_lines: bytes | None = None):
    recipe = small_recipe(tmp_path)
    (tmp_path / "train.tsv").write_bytes(train_lines)
    (tmp_path / "val.tsv").write_bytes(train_lines if val_lines is None else val_lines)
    corpus = recipe.corpus.__class__("files", "de", "en", paths={"train": [str(tmp_path / "train.tsv")],
                                                                  "val": [str(tmp_path / "val.tsv")]})
    return recipe.__class__(**{**recipe.__dict__, "corpus": corpus})


GOOD = b"a1 b1\tx1\na2 b2\tx2\n"
DATA_CASES = {
    "empty train": (b"", GOOD, r"train.tsv: the train split has no sentence pairs"),
    "only blank lines": (b"\n \t \n", GOOD, r"train.tsv: the train split has no sentence pairs"),
    "empty val": (GOOD, b"", r"val.tsv: the val split has no sentence pairs"),
    "invalid UTF-8": (GOOD + b"a3 \xff\xfe\tx3\n", GOOD, r"train.tsv, line 3: not valid UTF-8"),
    "binary garbage": (GOOD + b"\x00\x01\x02\x03\x04\tx\n", GOOD, r"train.tsv, line 3: contains NUL bytes"),
    "control bytes": (GOOD + b"\x01\x02\x03\x04\x05\x06\tz\n", GOOD, r"train.tsv, line 3: 6 of its 8 characters"),
    "missing column": (GOOD + b"only one column\n", GOOD, r"train.tsv, line 3: expected at least 2"),
}


@pytest.mark.parametrize("case", list(DATA_CASES))
def test_unusable_data_is_refused_before_training_naming_file_and_line(tmp_path, case):
    train_bytes, val_bytes, message = DATA_CASES[case]
    with pytest.raises(DataError, match=message):
        next(iter(train(files_recipe(tmp_path, train_bytes, val_bytes), tmp_path / "x.safetensors", None)))
    assert not (tmp_path / "x.safetensors").exists()


def test_mismatched_parallel_files_name_the_first_unpaired_line(tmp_path):
    from attnviz.engine.corpus.reader import read_parallel

    (tmp_path / "s.txt").write_text("a\nb\nc\n")
    (tmp_path / "t.txt").write_text("x\ny\n")
    with pytest.raises(DataError, match=r"s.txt has 3 lines but .*t.txt has 2.*line 3 has no partner"):
        read_parallel(tmp_path / "s.txt", tmp_path / "t.txt")


def test_a_diverging_loss_stops_the_run_with_a_message(tmp_path, monkeypatch):
    from attnviz.engine.training import loop as training

    real, calls = training.smoothed_loss, {"n": 0}

    def rising(*args):  # finite, but growing tenfold every step after the fourth
        calls["n"] += 1
        return real(*args) * 10.0 ** max(0, calls["n"] - 4)

    monkeypatch.setattr(training, "smoothed_loss", rising)
    events = list(train(small_recipe(tmp_path, epochs=4), tmp_path / "v.safetensors", None))
    assert isinstance(events[-1], TrainFailed) and "diverging" in events[-1].message
    assert events[-1].last_good == str(tmp_path / "v.last.safetensors")


def test_the_divergence_rule_ignores_noise_and_plateaus():
    watch = DivergenceWatch()
    losses = [8.0 / (1 + 0.1 * i) + (0.5 if i % 7 == 0 else 0.0) for i in range(300)] + [1.2] * 50
    assert all(watch.update(x, i, 1e-3) is None for i, x in enumerate(losses))
    rising = DivergenceWatch()
    messages = [rising.update(x, i, 1e-3) for i, x in enumerate([8, 4, 2, 1, 0.5] * 4 + [5.0 * 2 ** i
                                                                                            for i in range(20)])]
    assert any(messages)


def test_a_full_disk_after_the_state_was_saved_names_the_state_and_resumes_from_it(tmp_path, monkeypatch):
    from attnviz.engine.translator import Translator

    recipe = small_recipe(tmp_path)
    real = Translator.save

    def no_room_for_last(self, path, *args, **kwargs):
        if str(path).endswith(".last.safetensors"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(Translator, "save", no_room_for_last)
    failed = list(train(recipe, tmp_path / "f.safetensors", None))[-1]
    monkeypatch.undo()
    assert isinstance(failed, TrainFailed) and "training state of step 2 was saved" in failed.message
    assert failed.last_good == str(tmp_path / "f.state.safetensors") and not (tmp_path / "f.last.safetensors").exists()
    events = list(train(recipe, tmp_path / "f.state.safetensors", None, resume=True))
    assert any(isinstance(e, TrainNote) and "was missing" in e.message for e in events)
    assert isinstance(events[-1], TrainFinished)


@pytest.mark.parametrize("kill_at", [2, 3])  # the first save sequence: best, then the views, then the state
def test_a_sigkill_inside_the_first_save_sequence_resumes_from_the_best_file(tmp_path, kill_at):
    from attnviz.engine.training.runs import read_run_state

    recipe = small_recipe(tmp_path)
    out = tmp_path / "f.safetensors"
    proc = subprocess.run([sys.executable, "-c", KILL_INSIDE_SAVE, json.dumps(recipe.to_dict()), str(out),
                           str(kill_at)], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert read_header(out)[0]["step"] == 2 and not (tmp_path / "f.state.safetensors").exists()
    assert [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # what the kill left
    assert read_run_state(out).recipe.to_dict() == recipe.to_dict()  # what the app's Resume reads
    events = list(train(recipe, out, None, resume=True))
    notes = [e.message for e in events if isinstance(e, TrainNote)]
    assert any("left behind by a save that was cut short" in n for n in notes)
    assert any(n.startswith("the training state of this run was never saved") for n in notes)
    assert isinstance(events[-1], TrainFinished)
    assert [e.step for e in events if isinstance(e, TrainStep)][0] == 3  # went on after step 2
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_resuming_a_run_with_nothing_saved_says_so_and_cleans_the_temporary(tmp_path):
    from attnviz.engine.training.runs import read_run_state

    recipe = small_recipe(tmp_path)
    out = tmp_path / "n.safetensors"
    proc = subprocess.run([sys.executable, "-c", KILL_INSIDE_SAVE, json.dumps(recipe.to_dict()), str(out), "1"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL and not out.exists()
    left = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert left
    with pytest.raises(CheckpointError) as err:
        read_run_state(out)
    assert str(err.value) == (f"cannot resume {out}: its training-state file {tmp_path / 'n.state.safetensors'} does "
                              "not exist (nothing of the run was saved yet, or this file is not part of a run); "
                              f"removed {', '.join(left)}, left behind by a save that was cut short.")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
