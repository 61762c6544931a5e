"""``attnviz train | evaluate | presets | data`` through the real entry point."""

import json
import subprocess
import sys

import pytest

from attnviz.cli.main import main
from attnviz.engine.metrics import bleu_tok


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "attnviz", *args], capture_output=True, text=True, timeout=300,
                          env=env)


def test_presets_lists_every_recipe(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    for name in ("multi30k-de-en", "tatoeba-fr-en-small", "multi30k-fr-en", "tatoeba-fr-en", "tatoeba-de-en",
                 "multi30k-de-en-plus", "multi30k-en-de"):
        assert f"\n{name}\n" in "\n" + out
    assert main(["presets", "--json"]) == 0
    recipes = json.loads(capsys.readouterr().out)
    assert recipes["tatoeba-fr-en-small"]["train"]["schedule"] == "noam"
    assert recipes["multi30k-de-en"]["train"]["lr"] == 5e-4


def test_evaluate_files_json(tmp_path, trained_translator, capsys):
    model = tmp_path / "toy.safetensors"
    trained_translator.save(model)
    (tmp_path / "src.txt").write_text("q1 q2 q3 q4 q5\nq6 q7 q8 q9\n")
    (tmp_path / "ref.txt").write_text("w5 w4 w3 w2 w1\nw9 w8 w7 w6\n")
    assert main(["evaluate", "-m", str(model), "--src", str(tmp_path / "src.txt"), "--ref",
                 str(tmp_path / "ref.txt"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    hyps = trained_translator.translate_batch_tokens(["q1 q2 q3 q4 q5", "q6 q7 q8 q9"])
    expected = bleu_tok(hyps, [["w5", "w4", "w3", "w2", "w1"], ["w9", "w8", "w7", "w6"]])[0]
    assert report["bleu_tok"] == pytest.approx(expected) and expected > 50 and report["sentences"] == 2
    assert {"sacrebleu", "chrf", "ppl", "seconds", "bleu_tok_signature"} <= set(report)
    assert report["accuracy"] > 0.9


def test_train_refuses_bad_settings_before_starting(tmp_path):
    out = run("train", "--preset", "multi30k-de-en", "--lr", "-1", "--out", str(tmp_path / "x.safetensors"))
    # a value the recipe refuses is a usage error, as every bad option value is (issue 30)
    assert out.returncode == 2 and "lr must be positive" in out.stderr and "Traceback" not in out.stderr
    out = run("train", "--out", str(tmp_path / "x.safetensors"))
    assert out.returncode == 1 and "--preset NAME" in out.stderr


@pytest.mark.data
@pytest.mark.timeout(1200)  # three CLI runs, each given up to 300 s
def test_train_then_resume_then_evaluate(tmp_path, data_dir):
    ckpt = str(tmp_path / "m.safetensors")
    common = ["--set", "corpus.limit=200", "--set", "model.d_model=32", "--set", "model.ff_dim=64",
              "--set", "model.heads=4", "--set", "model.enc_layers=1", "--set", "model.dec_layers=1",
              "--batch-size", "50", "--set", "train.bleu_sentences=10"]
    out = run("train", "--preset", "multi30k-de-en", "--out", ckpt, "--max-steps", "3", *common)
    assert out.returncode == 0, out.stderr
    assert "training multi30k-de-en" in out.stdout and "eval step" not in out.stdout  # 4 steps make an epoch
    assert f"finished: no evaluation, so no best checkpoint; last {tmp_path / 'm.last.safetensors'}" in out.stdout
    out = run("train", "--resume", ckpt, "--max-steps", "8")
    assert out.returncode == 0, out.stderr
    assert "resuming at step 3" in out.stdout
    assert "eval step 4 epoch 1" in out.stdout and "eval step 8 epoch 2" in out.stdout
    out = run("evaluate", "-m", ckpt, "--split", "val", "--json", "--data-dir", str(data_dir))
    report = json.loads(out.stdout)
    assert report["sentences"] == 200 and report["preset"] == "multi30k-de-en" and report["ppl"] > 1


def test_data_list_names_the_sources(capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert "multi30k" in out and "tatoeba-fra" in out and "eng-fra.txt" in out


def test_ctrl_c_saves_a_resumable_checkpoint(tmp_path, trained_translator):
    import signal
    import time

    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"a{i} b{i % 5}\tx{i % 7}\n" for i in range(400)), encoding="utf-8")
    ckpt = tmp_path / "c.safetensors"
    args = [sys.executable, "-m", "attnviz", "train", "--preset", "multi30k-de-en", "--out", str(ckpt),
            "--set", "corpus.kind=files", "--set", f'corpus.paths={{"train": ["{tsv}"], "val": ["{tsv}"]}}',
            "--set", "src_tokenizer.mode=whitespace", "--set", "tgt_tokenizer.mode=whitespace",
            "--set", "model.d_model=32", "--set", "model.ff_dim=64", "--set", "model.heads=4",
            "--batch-size", "4", "--epochs", "100", "--set", "min_freq=1", "--set", "train.bleu_sentences=5"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()  # "training ...": the handler is installed and steps are running
    assert first.startswith("training"), first
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "stopped at step" in out and "Traceback" not in err
    assert (tmp_path / "c.state.safetensors").exists() and (tmp_path / "c.last.safetensors").exists()


def test_progress_ends_its_terminal_line_before_the_next_message(capsys, monkeypatch):
    from attnviz.cli.train import _Progress
    from attnviz.engine.events import TrainFinished, TrainStep

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    show = _Progress("demo", "runs/demo.safetensors")
    show(TrainStep(epoch=1, step=7, loss=2.5, lr=1e-3, tokens_per_s=900.0, progress=0.5, eta_s=12.0))
    captured = capsys.readouterr()
    assert captured.err.startswith("\repoch 1 [") and "\n" not in captured.err  # rewritten in place
    show(TrainFinished("runs/demo.safetensors", "runs/demo.last.safetensors", None))
    captured = capsys.readouterr()
    assert captured.err == "\n"  # the progress line is ended where it lives; stdout stays clean for a pipe
    assert captured.out == "finished: best runs/demo.safetensors; last runs/demo.last.safetensors\n"
    show(TrainFinished(None, "runs/demo.last.safetensors", None))  # no progress line open: no blank line
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ("finished: no evaluation, so no best checkpoint; "
                                                   "last runs/demo.last.safetensors\n")


def test_more_processes_than_gpus_are_refused_before_torchrun_starts(monkeypatch):
    import torch

    from attnviz.cli import train as cli_train
    from attnviz.engine.errors import ConfigError

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr("attnviz.engine.training.schedule.pick_device", lambda name: torch.device(name))
    cli_train._check_gpus("cuda", 1)  # one process per GPU: fine
    with pytest.raises(ConfigError, match="--nproc 2 needs a GPU for each process and this machine has 1"):
        cli_train._check_gpus("cuda", 2)
    cli_train._check_gpus("cpu", 4)  # processes on the CPU need no GPU


def test_resume_prints_the_restored_history_and_each_evaluation_is_announced(tmp_path, capsys):
    import dataclasses

    from attnviz.engine.training.loop import train
    from tests.engine.test_training import overfit_recipe

    pairs = [(f"a{i} b{i % 5}", f"x{i % 7}") for i in range(48)]
    recipe = dataclasses.replace(overfit_recipe(tmp_path, pairs).override(
        {"train.batch_size": "16", "train.eval_every": "2", "train.epochs": "2"}), probe="a1 b1")
    out = tmp_path / "r.safetensors"
    list(train(recipe, out, None, max_steps=5))
    assert main(["train", "--resume", str(out)]) == 0
    captured = capsys.readouterr()
    assert "restored the run's history: 5 steps, 2 evaluations (last: step 4, val loss" in captured.out
    assert "evaluating at step 6: validation loss, then translating 16 sentences for BLEU..." in captured.err


@pytest.mark.data
def test_a_warmup_longer_than_the_run_is_flagged_before_training(data_dir, tmp_path, capsys):
    """1 epoch of tatoeba-fr-en-small is 34 steps; its 4,000 warm-up steps would never end."""
    assert main(["train", "--preset", "tatoeba-fr-en-small", "--epochs", "1", "--max-steps", "1", "--data-dir",
                 str(data_dir), "--out", str(tmp_path / "t.safetensors"), "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "warning: train.warmup is 4,000 steps but the whole run is 34 steps" in err
