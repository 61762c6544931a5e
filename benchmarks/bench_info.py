"""``attnviz info`` speed, printed as JSON (measured, never asserted in tests: machines are shared and noisy).

Writes a random MarianMT folder (``--size marian``: OPUS-MT's shape, d_model 512, 6+6 layers, 58k pieces, 282 MiB
of float32 weights; ``--size tiny`` for a smoke run) with ``tests.folder_samples``, converts it to an attnviz
checkpoint, and times in a fresh interpreter each (the time a user waits, torch's import included where a command
needs it): ``attnviz info`` and ``attnviz info --check`` on the folder and on the file. Target: ``info`` on the
folder as quick as before the index checks (~0.3 s here), since it reads no weight and imports no torch.

    python benchmarks/bench_info.py [--size marian] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.folder_samples writes the folder

from tests.folder_samples import write_marian_folder  # noqa: E402

SIZES = {"tiny": {}, "marian": dict(d_model=512, layers=6, heads=8, ffn=2048, extra_vocab=58_000)}


def _attnviz(*args: str) -> float:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", "import sys; from attnviz.cli.main import main; sys.exit(main())",
                          *args], capture_output=True, text=True, cwd=ROOT)  # what the attnviz command runs
    if out.returncode != 0:
        raise SystemExit(f"attnviz {' '.join(args)} failed: {out.stderr.strip()}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="marian")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_marian_folder(Path(tmp) / "opus-mt-de-en", **SIZES[args.size])
        checkpoint = Path(tmp) / "converted.safetensors"
        _attnviz("convert", str(folder), "--out", str(checkpoint))
        report: dict[str, object] = {"size": args.size, "repeats": args.repeats,
                                     "weights_mib": round((folder / "model.safetensors").stat().st_size / 2**20, 1)}
        for name, path in (("folder", folder), ("file", checkpoint)):
            for check in (False, True):
                times = [_attnviz("info", *(["--check"] if check else []), str(path)) for _ in range(args.repeats)]
                report[f"info{'_check' if check else ''}_{name}_s_median"] = round(statistics.median(times), 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
