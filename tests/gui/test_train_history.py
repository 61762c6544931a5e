"""The Train tab continues a resumed run's views (loss curve, evaluations, attention forming), says when it is
evaluating, and warns before the first step about a warm-up longer than the run."""

from __future__ import annotations

import dataclasses

from attnviz.engine.events import EvalResult, EvalStarted, TrainNote, TrainStep
from attnviz.engine.training.loop import train
from tests.engine.test_training import overfit_recipe


def test_resume_continues_the_curves_the_table_and_the_forming_strip(qtbot, window, tmp_path):
    pairs = [(f"a{i} b{i % 5} c{i % 3}", f"x{i % 7} y{i % 5}") for i in range(90)]
    recipe = dataclasses.replace(overfit_recipe(tmp_path, pairs).override(
        {"train.batch_size": "16", "train.eval_every": "3", "train.epochs": "2"}), probe="a1 b1 c1")
    out = tmp_path / "run.safetensors"
    first = list(train(recipe, out, None, max_steps=7))  # stopped after 7 steps, evaluated at 3 and 6
    losses = [e.loss for e in first if isinstance(e, TrainStep)]
    tab = window.train_tab
    tab.resume_run(str(tmp_path / "run.last.safetensors"))
    qtbot.waitUntil(lambda: not tab.is_running(), timeout=60000)
    assert tab.message.isHidden(), tab.message.text()
    assert tab.curves.raw_loss.xs == list(range(1, 13))  # 2 epochs of 6 steps: the first 7 restored, not restarted
    assert tab.curves.raw_loss.ys[:7] == losses
    steps = [int(tab.eval_table.item(r, 1).text().replace(",", "")) for r in range(tab.eval_table.rowCount())]
    assert steps[:4] == [3, 6, 9, 12]
    assert [s.step for s in tab.forming.snapshots][:4] == [3, 6, 9, 12]
    assert tab.forming.position_label.text() != "No evaluation yet"
    first_probe = next(e.probe for e in first if isinstance(e, EvalResult))
    assert tab.forming.snapshots[0].probe.tokens == first_probe.tokens


def test_an_evaluation_says_so_and_a_warmup_warning_shows_before_the_first_step(window):
    tab = window.train_tab
    tab._on_event(EvalStarted(step=1200, sentences=500))
    assert tab.progress_label.text() == ("Evaluating at step 1,200: validation loss, then translating 500 "
                                         "validation sentences for BLEU. This can take a minute...")
    tab._on_event(TrainNote("train.warmup is 4,000 steps but the whole run is 34 steps", warning=True))
    assert not tab.message.isHidden()
    assert tab.message.text() == "Warning: train.warmup is 4,000 steps but the whole run is 34 steps"
