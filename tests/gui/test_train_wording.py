"""How the Train tab words a run's events (gui.train.jobs): plain functions, checked without a window."""

from attnviz.engine.events import TrainFailed, TrainFinished, TrainStarted, TrainStep, TrainStopped
from attnviz.session.train.jobs import failed_text, finished_text, started_text, step_text, stopped_text


def test_started_and_step_lines_carry_the_run_figures():
    started = TrainStarted(total_steps=2_270, epochs=10, parameters=9_037_316, train_pairs=29_000, val_pairs=1_014,
                           device="cpu", resumed_from_step=454, processes=1)
    assert started_text(started) == ("9,037,316 parameters, 29,000 training pairs, 2,270 steps on cpu, resumed at "
                                     "step 454")
    step = TrainStep(step=1_234, epoch=6, loss=2.3456, lr=5e-4, tokens_per_s=4_321.7, progress=0.54, eta_s=3_725.0)
    assert step_text(step, 2_270) == "Epoch 6 · step 1,234 of 2,270 · loss 2.346 · 4,322 tokens/s · 1 h 02 min left"


def test_the_ends_of_a_run_say_what_was_kept():
    assert finished_text(TrainFinished("r.safetensors", "r.last.safetensors", None)) == \
        "Finished. Best checkpoint: r.safetensors"
    assert finished_text(TrainFinished(None, "r.last.safetensors", None)) == \
        "Finished before any evaluation: no best checkpoint; last: r.last.safetensors"
    assert stopped_text(TrainStopped(7, "r.last.safetensors")) == \
        "Stopped at step 7; saved r.last.safetensors. Resume run continues from there."
    assert failed_text(TrainFailed("Loss is NaN.", "r.last.safetensors")) == \
        "Loss is NaN. The last good checkpoint is r.last.safetensors."
    assert failed_text(TrainFailed("Loss is NaN.", None)) == "Loss is NaN. No checkpoint had been saved yet."
