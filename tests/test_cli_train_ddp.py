"""Training under torchrun (DistributedDataParallel, gloo on CPU): two processes against one, stop and resume.

Tolerance of the comparison with one process. Both runs take the same Adam steps on the same global batches, on one
thread each: two ranks with DDP averaging their gradients (an all-reduce: (g0 + g1) / 2), one process differentiating
the mean of the two batches' losses (autograd accumulates g0 / 2 + g1 / 2). Only the rounding of that sum can differ,
in the last bit of float32 (about 6e-8 relative); Adam's update per step is at most about lr (1e-3) per weight and
smooth in the gradient where the gradient is not tiny, so after 6 steps the weights may differ by a small multiple of
1e-7 times lr: 1e-5 absolute leaves margin yet is far below one step's change (checked too), so a rank that trained on
other batches fails it (one batch a step instead of two: 1e-2 apart). Adam is scale invariant, so the weights would
not show a sum of the ranks' gradients instead of their mean: the last step's gradients (no clipping) are compared
too, within 1e-4 relative (1e-7 absolute for entries near zero), as the weights they are taken at agree. The
exception is a weight whose true gradient is zero, the key projections' biases (softmax ignores what adds the same
to every score): their gradient is rounding noise, which Adam scales up to steps of about lr each way, so they are
only held within steps x lr. (In practice, on one thread each, the two runs come out bit for bit equal.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from attnviz.cli.train import _first_cause
from attnviz.engine.checkpoints.header import read_header
from attnviz.engine.corpus.batching import batch_tensors, make_batches
from attnviz.engine.metrics import smoothed_loss
from attnviz.engine.training.prepare import prepare
from attnviz.engine.training.presets import get_preset
from attnviz.engine.translator import build_model

pytestmark = pytest.mark.timeout(600)  # several launches of two processes, each given up to 120 s

SETTINGS = {"corpus.kind": "files", "src_tokenizer.mode": "whitespace", "tgt_tokenizer.mode": "whitespace",
            "model.d_model": "32", "model.ff_dim": "64", "model.heads": "4", "model.enc_layers": "1",
            "model.dec_layers": "1", "model.dropout": "0", "train.batch_size": "8", "train.lr": "1e-3",
            "train.epochs": "100", "train.bleu_sentences": "5", "train.threads": "1", "min_freq": "1",
            "train.device": "cpu"}

RANK_SCRIPT = """
import sys
from safetensors.torch import save_file
from attnviz.engine.training import loop as training, trainer
from attnviz.engine.training.distributed import exit_worker
from attnviz.engine.training.presets import Recipe
import json, os

seen = []
init = trainer.Trainer.__init__
def keep(self, *args, **kwargs):
    init(self, *args, **kwargs)
    seen.append(self)
trainer.Trainer.__init__ = keep
recipe = Recipe.from_dict(json.loads(open(sys.argv[1]).read()))
for event in training.train(recipe, sys.argv[2], max_steps=int(sys.argv[3])):
    pass
rank = os.environ["RANK"]
model = seen[0].model
grads = {"grad." + k: p.grad for k, p in model.named_parameters() if p.grad is not None}  # the last step's
save_file({k: v.contiguous() for k, v in (model.state_dict() | grads).items()}, sys.argv[2] + f".rank{rank}")
exit_worker(0)  # as `attnviz train` ends a worker
"""


def env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parent.parent)
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))


def corpus(tmp_path: Path) -> dict[str, str]:
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"a{i} b{i % 5} c{i % 3}\tx{i % 7} y{i % 5}\n" for i in range(400)), encoding="utf-8")
    return SETTINGS | {"corpus.paths": json.dumps({"train": [str(tsv)], "val": [str(tsv)]})}


def start_two(tmp_path: Path, out: Path) -> subprocess.Popen:
    """``attnviz train --nproc 2`` on the toy corpus, running (for 2,500 steps: long enough to be stopped)."""
    flags = [arg for key, value in corpus(tmp_path).items() for arg in ("--set", f"{key}={value}")]
    return subprocess.Popen([sys.executable, "-m", "attnviz", "train", "--nproc", "2", "--preset", "multi30k-de-en",
                             "--out", str(out), *flags], env=env(), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def torchrun(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args]


def one_process_reference(recipe, steps: int, world: int = 2) -> dict[str, torch.Tensor]:
    """What two ranks compute, in one process: each step's loss is the mean of the two ranks' batch losses. Returns
    the weights, and the last step's gradients as ``grad.NAME``."""
    cfg = recipe.train
    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    data = prepare(recipe)
    model = build_model(recipe.model_config(len(data.src_vocab), len(data.tgt_vocab)))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps)
    batches = make_batches([(len(s), len(t)) for s, t in data.train], cfg, seed=cfg.seed * 1000 + 1)
    model.train()
    for step in range(steps):
        losses = []
        for indices in batches[step * world:(step + 1) * world]:
            src, tgt = batch_tensors([data.train[i] for i in indices])
            losses.append(smoothed_loss(model(src, tgt[:, :-1], 1.0), tgt[:, 1:], 0.0))
        opt.zero_grad()
        (sum(losses) / world).backward()
        if cfg.clip_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
        opt.step()
    grads = {"grad." + k: p.grad.detach().clone() for k, p in model.named_parameters() if p.grad is not None}
    return {k: v.detach() for k, v in model.state_dict().items()} | grads


def test_two_processes_equal_one_over_the_same_global_batches(tmp_path):
    # no clipping, so the last step's gradients are DDP's average as it left them (Adam alone would hide a sum:
    # it is scale invariant)
    recipe = get_preset("multi30k-de-en").override(corpus(tmp_path) | {"train.clip_norm": "0"})
    (tmp_path / "recipe.json").write_text(json.dumps(recipe.to_dict()))
    script = tmp_path / "ranks.py"
    script.write_text(RANK_SCRIPT)
    out = tmp_path / "d.safetensors"
    done = subprocess.run(torchrun(str(script), str(tmp_path / "recipe.json"), str(out), "6"), env=env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    rank0, rank1 = load_file(f"{out}.rank0"), load_file(f"{out}.rank1")
    assert rank0.keys() == rank1.keys()
    for name in rank0:  # DDP hands every rank the same averaged gradient: bit for bit the same weights
        assert torch.equal(rank0[name], rank1[name]), name
    saved = load_file(str(tmp_path / "d.last.safetensors"))
    assert not any(k.startswith("module.") for k in saved)  # rank 0 saved the model, not its DDP wrapper
    model_weights = {k for k in rank0 if not k.startswith("grad.")}
    weights = {k: v for k, v in saved.items() if k in model_weights}
    assert weights.keys() == model_weights and all(torch.equal(weights[k], rank0[k]) for k in model_weights)
    meta, _ = read_header(tmp_path / "d.state.safetensors")
    assert (meta["step"], meta["epoch"], meta["batch_index"]) == (6, 1, 12)  # the position counts global batches
    reference, first = one_process_reference(recipe, 6), one_process_reference(recipe, 1)
    moved = max((reference[k] - first[k]).abs().max().item() for k in model_weights)
    assert moved > 1e-3  # five steps move the weights by far more than the tolerance
    for name in model_weights:
        zero_gradient = "k_proj.bias" in name
        torch.testing.assert_close(rank0[name], reference[name], rtol=0, atol=6 * 1e-3 if zero_gradient else 1e-5,
                                   msg=name)
    for name in (k for k in reference if k.startswith("grad.") and "k_proj.bias" not in k):
        # the gradient of the mean of the two losses: DDP averaged (a sum would be twice as large)
        torch.testing.assert_close(rank0[name], reference[name], rtol=1e-4, atol=1e-7, msg=name)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_killing_the_launcher_saves_and_one_process_resumes_at_the_global_position(tmp_path, sig):
    out = tmp_path / "k.safetensors"
    launcher = start_two(tmp_path, out)
    first = launcher.stdout.readline()  # rank 0's "training ...": both ranks are stepping
    assert first.startswith("training") and "x 2 processes" in first, first + launcher.stderr.read()[-3000:]
    time.sleep(2)
    launcher.send_signal(sig)
    rest, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 130 and "stopped at step" in rest, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    meta, _ = read_header(tmp_path / "k.state.safetensors")
    step, epoch, position = meta["step"], meta["epoch"], meta["batch_index"]
    assert step > 0 and position == 2 * (step - 25 * (epoch - 1))  # 50 batches an epoch, 2 a step
    resumed = subprocess.run([sys.executable, "-m", "attnviz", "train", "--resume", str(out), "--max-steps",
                              str(step + 3)], env=env(), capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming at step {step}" in resumed.stdout and "processes" not in resumed.stdout
    after, _ = read_header(tmp_path / "k.state.safetensors")
    left = 50 - position  # one process takes one batch a step, from where the two left off
    expected = (epoch, position + 3) if left > 3 else (epoch + 1, 3 - left)
    assert (after["step"], after["epoch"], after["batch_index"]) == (step + 3, *expected)


def test_one_process_run_resumes_with_two_at_its_global_position(tmp_path):
    settings = corpus(tmp_path)
    out = tmp_path / "r.safetensors"
    flags = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    alone = subprocess.run([sys.executable, "-m", "attnviz", "train", "--preset", "multi30k-de-en", "--out", str(out),
                            "--max-steps", "3", *flags], env=env(), capture_output=True, text=True, timeout=120)
    assert alone.returncode == 0, alone.stderr[-3000:]
    two = subprocess.run([sys.executable, "-m", "attnviz", "train", "--nproc", "2", "--resume", str(out),
                          "--max-steps", "5"], env=env(), capture_output=True, text=True, timeout=120)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "resuming at step 3" in two.stdout and "x 2 processes" in two.stdout
    meta, _ = read_header(tmp_path / "r.state.safetensors")
    assert (meta["step"], meta["epoch"], meta["batch_index"]) == (5, 1, 3 + 2 * 2)  # two batches a step from 3
    assert not any(k.startswith("module.") for k in load_file(str(tmp_path / "r.last.safetensors")))


def test_bad_settings_are_refused_once_before_any_process_starts(tmp_path):
    out = subprocess.run([sys.executable, "-m", "attnviz", "train", "--nproc", "2", "--preset", "multi30k-de-en",
                          "--lr", "-1", "--out", str(tmp_path / "x.safetensors")], env=env(), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("lr must be positive") == 1 and "torch" not in out.stderr


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except (OSError, ValueError):
            continue
        if entry.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return sorted(found)


@pytest.mark.parametrize("victim", [1, 0], ids=["rank1", "rank0"])
def test_a_killed_worker_gives_one_line_per_failure_and_the_run_resumes(tmp_path, victim):
    out = tmp_path / "d.safetensors"
    launcher = start_two(tmp_path, out)
    first = launcher.stdout.readline()
    assert "x 2 processes" in first, first + launcher.stderr.read()[-3000:]
    time.sleep(2)  # both ranks are stepping (and rank 0 has saved a resume point at its first evaluation)
    workers = _children(launcher.pid)
    assert len(workers) == 2
    os.kill(workers[victim], signal.SIGKILL)  # the workers start in rank order
    _, err = launcher.communicate(timeout=120)
    assert launcher.returncode == 1
    assert "Traceback" not in err and "[rank" not in err and "torch/distributed" not in err, err[-3000:]
    errors = [line for line in err.splitlines() if "error:" in line]
    expected = [f"attnviz: error: training process {victim} failed (killed by signal 9)"]
    if victim == 1:  # the survivor that prints (rank 0) says why it stopped, and where the run can resume
        assert errors[0].startswith("attnviz: error: training process 0 stopped because another process of the "
                                    "run ended or stopped answering (") and "Last good checkpoint" in errors[0]
        errors = errors[1:]
    assert errors == expected, err[-3000:]
    resumed = subprocess.run([sys.executable, "-m", "attnviz", "train", "--resume", str(out), "--max-steps", "1000"],
                             env=env(), capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0 and "resuming at step" in resumed.stdout, resumed.stderr[-3000:]


def test_the_launcher_names_the_killed_process_not_the_one_that_lost_it():
    assert _first_cause({0: 1, 1: -9}) == (1, -9)
    assert _first_cause({1: 1, 0: 1}) == (0, 1)
    assert _first_cause({0: 130, 1: 130}) == (0, 130)
