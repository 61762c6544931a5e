"""GUI responsiveness, offscreen, printed as JSON (measured, never asserted in tests).

With a reference-A-sized model (3 decoder layers x 8 heads; random weights with <eos> suppressed unless --model is
given) the script translates a sentence to exactly ``--tokens`` output tokens (a given model: at most that many; a
language model continues a prefix instead) with the head grid visible, then steps through every step. It reports:
- the longest stall of the GUI event loop, seen by a 10 ms heartbeat timer, over the whole run;
- the time to redraw the attention panel (large map + 24-map grid) for one step, median and max;
- the time from pressing Enter to the first output token on screen (model already loaded);
- the longest stall while a beam search of width 5 decodes (the tree forming step by step).
Then, when ATTNVIZ_DATA points at the corpora, it trains a small model from the Train tab for ``--train-seconds``
with the curves visible and reports the longest stall while the corpus is read and the model built (Start to the
first step), the longest stall during training and how often the curves were redrawn.
Targets: stall < 100 ms, grid redraw < 150 ms, first token < 300 ms, curves updated at least once a second.

``--model`` may be a model folder, an LLM's among them: it is decoded greedily (not by its own configured decoding,
whose length limit is its own), so ``--tokens`` holds. ``--large qwen2.5-0.5b`` (or another shape of
``llm_large.SHAPES``) writes that random-weights LLM folder once into the bench cache and measures it.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_gui.py [--model CKPT | --large NAME] [--tokens 20]
        [--train-seconds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).parent))

from PySide6.QtCore import QElapsedTimer, QSettings, Qt, QTimer  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402

from attnviz.gui.app import make_app  # noqa: E402
from attnviz.gui.main_window import MainWindow  # noqa: E402

SENTENCE = "Ein kleines Mädchen in einem rosa Kleid klettert eine Treppe zu einem Spielhaus hinauf ."
LM_PREFIX = "em"  # a language model (names) continues a prefix instead


class Heartbeat:
    """A 10 ms timer; the longest gap between its ticks, minus 10 ms, is the longest stall."""

    def __init__(self):
        self.clock = QElapsedTimer()
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(10)
        self.timer.timeout.connect(self.tick)
        self.last = 0
        self.longest = 0

    def start(self) -> None:
        self.clock.start()
        self.last = 0
        self.timer.start()

    def tick(self) -> None:
        now = self.clock.elapsed()
        self.longest = max(self.longest, now - self.last - 10)
        self.last = now


def wait_until(app, condition, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the GUI did not reach the expected state")
        app.processEvents()
        time.sleep(0.001)


SMALL_RECIPE = {"corpus.limit": "3000", "model.d_model": "64", "model.ff_dim": "128", "model.heads": "4",
                "model.enc_layers": "2", "model.dec_layers": "2", "train.batch_size": "64", "train.lr": "0.002",
                "train.epochs": "50"}


def bench_training(app, window, seconds: float) -> dict:
    """Train a small Multi30k model from the Train tab for ``seconds`` with the curves on screen."""
    import tempfile

    tab = window.train_tab
    window.tabs.setCurrentWidget(tab)
    form = tab.form
    form.preset_combo.setCurrentIndex(form.preset_combo.findData("multi30k-de-en"))
    form.data_edit.setText(os.environ["ATTNVIZ_DATA"])
    for row in range(form.table.rowCount()):
        key = form.table.item(row, 0).text()
        if key in SMALL_RECIPE:
            form.table.item(row, 1).setText(SMALL_RECIPE[key])
    with tempfile.TemporaryDirectory() as tmp:
        form.out_edit.setText(str(Path(tmp) / "bench.safetensors"))
        loading = Heartbeat()
        loading.start()
        tab.start()
        wait_until(app, lambda: bool(tab.curves.raw_loss.xs), timeout_s=120)  # data read, first step done
        loading.timer.stop()
        start_stall = loading.longest
        updates_before, steps_before = tab.curve_updates, len(tab.curves.raw_loss.xs)
        beat = Heartbeat()
        beat.start()
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            app.processEvents()
            time.sleep(0.001)
        elapsed = time.perf_counter() - start
        stall = beat.longest
        tab.stop_and_wait(30000)
    updates = tab.curve_updates - updates_before
    return {"seconds": round(elapsed, 1), "steps": len(tab.curves.raw_loss.xs) - steps_before,
            "evaluations": tab.eval_table.rowCount(), "longest_stall_ms": stall,
            "start_to_first_step_longest_stall_ms": start_stall, "curve_updates": updates,
            "curve_updates_per_s": round(updates / elapsed, 2)}


def bench_beam(app, window, width: int, tokens: int) -> dict:
    """A beam search of ``width`` in the Translate tab (the tree forming and the best live hypothesis shown at
    every step, with the head grid visible): the longest stall of the event loop while it decodes."""
    tab = window.translate_tab
    tab.sampling_combo.setCurrentIndex(2)
    tab.sampling_row.beam_spin.setValue(width)
    tab.playback.max_len_spin.setValue(tokens)
    app.processEvents()
    beat = Heartbeat()
    beat.start()
    start = time.perf_counter()
    QTest.keyClick(tab.source_edit, Qt.Key.Key_Return)
    wait_until(app, lambda: tab.worker._thread is None and tab.document.finished,
               timeout_s=300)
    elapsed = time.perf_counter() - start
    for _ in range(20):
        app.processEvents()
        time.sleep(0.005)
    beat.timer.stop()
    tree = tab.document.tree
    assert tree is not None, "the beam search grew no tree"
    tab.sampling_combo.setCurrentIndex(0)
    return {"beam": width, "steps": max(n.step.index for n in tree.nodes.values()) + 1, "tree_nodes": len(tree.nodes),
            "seconds": round(elapsed, 2), "longest_stall_ms": beat.longest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--large", help="a random LLM of this shape (llm_large.SHAPES), written once, as --model")
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--train-seconds", type=float, default=30.0)
    args = parser.parse_args()
    if args.large:
        import tempfile

        from llm_large import write_folder

        root = Path(os.environ.get("ATTNVIZ_BENCH_CACHE", Path(tempfile.gettempdir()) / "attnviz-bench"))
        args.model = str(write_folder(args.large, root, "float32"))
    app = make_app()
    window = MainWindow(QSettings(str(Path("/tmp") / "attnviz-bench.ini"), QSettings.Format.IniFormat))
    window.resize(1400, 900)
    window.show()
    if args.model:
        window.load_model(args.model)
        wait_until(app, lambda: window.translator is not None)
    else:
        from bench_decode import random_translator

        translator = random_translator()
        translator.src_spec.prepare()
        translator.metadata["path"] = "random reference-A weights"
        window._on_loader_produced(translator)
    tab = window.translate_tab
    tab.sampling_combo.setCurrentIndex(0)  # greedy, so that Max length holds (not a folder's own decoding)
    tab.playback.max_len_spin.setValue(args.tokens)
    tab.playback.instant_check.setChecked(True)
    tab.source_edit.setText(SENTENCE if window.translator.has_source else LM_PREFIX)
    tab.attention.select(kind="cross")  # kept only by models that have it; a language model shows its self-attention
    app.processEvents()
    beat = Heartbeat()
    beat.start()
    start = time.perf_counter()
    QTest.keyClick(tab.source_edit, Qt.Key.Key_Return)
    wait_until(app, lambda: len(tab.output_view.tokens()) >= 1)
    tab.output_view.repaint()
    first_token_ms = (time.perf_counter() - start) * 1000
    wait_until(app, lambda: tab.document.finished)
    redraws = []
    for step in range(len(tab.document.steps)):
        t0 = time.perf_counter()
        tab.go_to(step)
        tab.attention.heatmap.repaint()
        tab.attention.grid.repaint()
        redraws.append((time.perf_counter() - t0) * 1000)
        app.processEvents()
    for _ in range(20):
        app.processEvents()
        time.sleep(0.005)
    kind = tab.attention.kind
    shown = tab.document.maps(kind, len(tab.document.steps) - 1)
    assert shown is not None, f"no {kind} attention was shown"
    layers, heads = shown.shape[:2]
    beat.timer.stop()
    translate_stall = beat.longest
    beam = bench_beam(app, window, 5, args.tokens)
    training = bench_training(app, window, args.train_seconds) if os.environ.get("ATTNVIZ_DATA") else {
        "skipped": "set ATTNVIZ_DATA to the folder with the Multi30k files to measure the Train tab"}
    print(json.dumps({
        "model": (f"{args.large}-shaped, random weights" if args.large else args.model)
        or "random reference-A weights, <eos> suppressed",
        "reads_prompt": bool(window.translator.kind.reads_prompt),
        "output_tokens": len(tab.document.steps),
        "attention_kind": kind,
        "grid_maps": layers * heads,
        "longest_stall_ms": translate_stall,
        "grid_redraw_ms_median": round(statistics.median(redraws), 1),
        "grid_redraw_ms_max": round(max(redraws), 1),
        "enter_to_first_token_ms": round(first_token_ms, 1),
        "beam_search": beam,
        "training": training,
        "targets": {"longest_stall_ms_under": 100, "grid_redraw_ms_under": 150, "first_token_ms_under": 300,
                    "curve_updates_per_s_at_least": 1},
    }, indent=2))
    window.close()


if __name__ == "__main__":
    main()
