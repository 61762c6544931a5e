"""The Train tab's run document (gui/train/run_document.py), Qt-free: fed training events, it keeps what the views
show and tells its listeners each change, steps batched until a flush."""

from __future__ import annotations

from attnviz.engine.events import (
    CheckpointSaved,
    EvalResult,
    EvalStarted,
    TrainFailed,
    TrainFinished,
    TrainHistory,
    TrainNote,
    TrainStarted,
    TrainStep,
    TrainStopped,
)
from attnviz.engine.records import EvalRecord
from attnviz.session.train.run_document import (
    Announced,
    CheckpointsChanged,
    EvaluationAdded,
    MessageChanged,
    ProgressChanged,
    RunCleared,
    StepsAdded,
    TrainRunDocument,
)


def _step(n: int, total: int = 10) -> TrainStep:
    return TrainStep(step=n, epoch=1, loss=5.0 - n / 10, lr=1e-3, tokens_per_s=1000.0, progress=n / total, eta_s=9.0)


def _result(step: int) -> EvalResult:
    return EvalResult(EvalRecord(step, 1, 3.0, 20.1, 0.4, 12.5), (), None)


def _recorded() -> tuple[TrainRunDocument, list]:
    run, seen = TrainRunDocument(), []
    run.subscribe(seen.append)
    return run, seen


def test_steps_wait_for_a_flush_and_then_arrive_together_with_the_progress():
    run, seen = _recorded()
    run.begin("Toy", translation=True)
    assert [type(c) for c in seen] == [RunCleared, MessageChanged, ProgressChanged]
    assert seen[0] == RunCleared(True) and run.status_line.startswith("Preparing Toy")
    run.feed(TrainStarted(total_steps=10, epochs=1, parameters=1_000, train_pairs=50, val_pairs=5, device="cpu"))
    seen.clear()
    for n in (1, 2, 3):
        run.feed(_step(n))
    assert seen == [] and len(run.pending) == 3  # buffered: nothing redrawn per step
    run.flush()
    assert seen == [StepsAdded((_step(1), _step(2), _step(3))), ProgressChanged(0.3)]
    assert run.last_step == _step(3) and run.flushes == 1 and run.pending == []
    assert run.status_line.startswith("Epoch 1 · step 3 of 10 · loss 4.700")
    run.flush()
    assert run.flushes == 1  # nothing pending: no redraw


def test_an_event_that_is_not_a_step_flushes_the_steps_before_it():
    run, seen = _recorded()
    run.feed(_step(4))
    run.feed(EvalStarted(step=4, sentences=100))
    assert isinstance(seen[0], StepsAdded) and seen[0].steps == (_step(4),)
    assert run.status_line.startswith("Evaluating at step 4: validation loss, then translating 100")
    seen.clear()
    run.feed(_result(4))
    assert seen == [EvaluationAdded(_result(4))]


def test_paused_or_stopping_keeps_its_line_while_steps_still_reach_the_views():
    run, seen = _recorded()
    run.paused = True
    run.set_status("Paused: press Resume to continue.")
    run.feed(_step(5))
    run.flush()
    assert run.status_line == "Paused: press Resume to continue." and run.last_step == _step(5)
    assert StepsAdded((_step(5),)) in seen


def test_checkpoints_messages_and_the_end_of_a_run():
    run, seen = _recorded()
    run.feed(CheckpointSaved("/runs/x.last.safetensors", "last", 3))
    run.feed(CheckpointSaved("/runs/x.best.safetensors", "average", 3))
    assert run.paths == {"last": "/runs/x.last.safetensors", "best": "/runs/x.best.safetensors"}
    assert seen.count(CheckpointsChanged()) == 2
    run.feed(TrainNote("warm-up longer than the run", warning=True))
    assert run.message == "Warning: warm-up longer than the run"
    run.feed(TrainNote("using 2 threads"))
    assert Announced("using 2 threads") in seen and run.message == "Warning: warm-up longer than the run"
    run.feed(TrainFinished(None, "/runs/y.safetensors", None))
    assert run.paths["best"] == "/runs/x.best.safetensors"  # a finish does not replace what was written
    assert run.status_line.startswith("Finished before any evaluation") and ProgressChanged(1.0) in seen
    assert seen[-1] == Announced("Training finished")


def test_a_stop_a_failure_and_a_resumed_history():
    run, seen = _recorded()
    run.feed(TrainStopped(7, "/runs/z.safetensors"))
    assert run.paths["last"] == "/runs/z.safetensors" and run.status_line.startswith("Stopped at step 7")
    run.failed("disk full.")
    assert run.message == "Training failed: disk full. The last good checkpoint is /runs/z.safetensors."
    run.feed(TrainFailed("Out of memory.", None))
    assert run.message == "Out of memory. No checkpoint had been saved yet."
    seen.clear()
    run.feed(TrainHistory((_step(1), _step(2)), (_result(2),)))
    assert seen == [StepsAdded((_step(1), _step(2))), EvaluationAdded(_result(2))]
