"""Head statistics speed on CPU, printed as JSON (measured, never asserted in tests: machines are shared and noisy).

With the bundled de-en Transformer (or ``--model``) over the Multi30k validation set (1,014 sentences, read from
ATTNVIZ_DATA) on the first of ``--threads`` (torch intra-op threads), it times:
- reading and tokenizing the corpus;
- head statistics teacher-forcing the references (the default when a corpus has them), all of it: tokenizing,
  batched attention, statistics; target: under 10 s on 2 cores;
- head statistics teacher-forcing the model's own greedy outputs (batched greedy search first);
- word alignment of every cross-attention head (per head, per layer and averaged, AER against the averaged
  alignment itself as a stand-in gold set, so the timing includes the scoring);
and with ``--gui`` the longest stall of the GUI event loop (10 ms heartbeat) while the Analysis tab runs the same
statistics offscreen (target: under 100 ms, as in bench_gui.py). Every further ``--threads`` value times the
reference statistics again with that many threads: on a 2-core machine shared with other work, two OpenMP threads
can be several times slower than one (they spin waiting for a busy core).

    python benchmarks/bench_heads.py [--model CKPT] [--threads 2,1] [--limit 0] [--gui]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from attnviz.engine.analysis.alignment import align_steps, parse_pharaoh
from attnviz.engine.analysis.run import compute_head_stats, corpus_pairs
from attnviz.engine.analysis.stats import head_tags
from attnviz.engine.loading import load_translator

ROOT = Path(__file__).resolve().parent.parent


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, round(time.perf_counter() - start, 2)


def _last(steps):
    return list(steps)[-1]


def bench_engine(translator, sources, targets) -> dict:
    stats, ref_s = _timed(lambda: compute_head_stats(translator, sources, targets))
    _, greedy_s = _timed(lambda: compute_head_stats(translator, sources, None))
    first, _ = _timed(lambda: _last(align_steps(translator, sources, targets)))
    gold = [parse_pharaoh(line) for line in first.alignments]
    scored, align_s = _timed(lambda: _last(align_steps(translator, sources, targets, gold)))
    positional = [f"{r['kind']} L{r['layer'] + 1}H{r['head'] + 1}" for r in stats.table() if "positional" in r["tags"]]
    cross = [r for r in stats.table() if r["kind"] == "cross"]
    best = max(cross, key=lambda r: r["alignment_proxy"]) if cross else None
    return {"sentences": len(sources), "stats_reference_s": ref_s, "stats_greedy_s": greedy_s,
            "align_all_heads_with_aer_s": align_s, "positional_heads": positional,
            "best_proxy_head": None if best is None else f"L{best['layer'] + 1}H{best['head'] + 1}",
            "best_proxy": None if best is None else best["alignment_proxy"],
            "tags": {tag: sum(tag in head_tags(r["kind"], {k: v if v is not None else float("nan") for k, v in
                                                          r.items() if k not in ("kind", "layer", "head", "tags")})
                              for r in stats.table()) for tag in ("positional", "sink", "diffuse", "aligning")}}


def bench_gui(model: str, limit: int) -> dict:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_gui import Heartbeat, wait_until
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from attnviz.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    window = MainWindow(QSettings(str(Path("/tmp") / "bench_heads.ini"), QSettings.Format.IniFormat))
    window.show()
    window.load_model(model)
    wait_until(app, lambda: window.translator is not None, 120)
    tab = window.analysis_tab
    window.tabs.setCurrentWidget(tab)
    tab.limit_spin.setValue(limit)
    beat = Heartbeat()
    beat.start()
    start = time.perf_counter()
    tab.run()
    wait_until(app, lambda: tab.stats is not None and not tab.is_running(), 300)
    return {"gui_run_s": round(time.perf_counter() - start, 2), "gui_longest_stall_ms": beat.longest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models" / "de-en-multi30k.safetensors"))
    parser.add_argument("--threads", default="2,1", help="comma-separated thread counts (default 2,1)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N validation sentences (0 = all)")
    parser.add_argument("--gui", action="store_true", help="also measure the GUI's longest stall during a run")
    args = parser.parse_args()
    if not os.environ.get("ATTNVIZ_DATA"):
        raise SystemExit("set ATTNVIZ_DATA to the folder with the Multi30k files")
    threads = [int(n) for n in args.threads.split(",")]
    torch.set_num_threads(threads[0])
    translator = load_translator(args.model)
    translator.src_spec.prepare()
    translator.tgt_spec.prepare()
    (sources, targets), read_s = _timed(lambda: corpus_pairs(translator, "val", limit=args.limit))
    _, tokenize_s = _timed(lambda: [translator.src_spec.tokenize(s) for s in sources])
    report = {"model": Path(args.model).name, "threads": threads[0], "read_corpus_s": read_s,
              "tokenize_sources_s": tokenize_s, **bench_engine(translator, sources, targets)}
    for n in threads[1:]:
        torch.set_num_threads(n)
        _, report[f"stats_reference_{n}_threads_s"] = _timed(lambda: compute_head_stats(translator, sources, targets))
    torch.set_num_threads(threads[0])
    if args.gui:
        report.update(bench_gui(args.model, args.limit))
    report["targets"] = {"stats_reference_s_under": 10, "gui_longest_stall_ms_under": 100}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
