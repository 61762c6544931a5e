"""Measuring how a model folder opens, importable by the benchmark scripts (``bench_loading``, ``bench_peers``): each
measurement runs in a fresh interpreter, one thread, and reports its own wall times and peak memory, so figures
from different code (attnviz from another checkout, ``transformers``) compare in one run.

- ``open_probe(which, folder, root=None)``: import, open the folder, decode its first token; returns ``import_s``,
  ``open_s`` (opening alone), ``first_token_s`` and ``peak_mib`` (the process's peak resident memory, after its
  first token: VmHWM). ``which`` is "attnviz" (from ``root``, a checkout, when given: PYTHONPATH), "transformers"
  (a MarianMT folder) or "transformers-m2m100" (an NLLB-shaped folder, fed ids).
- ``cold_translate(which, folder, root=None, tokens=20)``: the whole command a user waits for, ``attnviz translate
  -m FOLDER SENTENCE`` or the same with ``transformers`` (import, load, translate greedily at most ``tokens``
  tokens), timed from outside; returns ``wall_s`` and ``peak_mib`` (attnviz's own VmHWM, which it writes at exit;
  else ``os.wait4``'s ru_maxrss of that child, which includes its parent's resident size at the fork: keep the
  measuring process small, as ``bench_loading`` does).
- ``marian_folder(folder, size)``: the random MarianMT folder both read (``tests.folder_samples``; "marian" is
  OPUS-MT's shape: d 512, 6+6 layers, 58k pieces), or with ``size`` "nllb600m" a random NLLB folder of
  NLLB-200-distilled-600M's shape (d 1024, 12+12 layers, 256,206 entries).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "ein hund läuft durch den schnee"
SIZES = {"tiny": {}, "marian": dict(d_model=512, layers=6, heads=8, ffn=2048, extra_vocab=58_000),
         # NLLB-200-distilled-600M's shape: a 256k x 1024 shared embedding (1 GB of the 2.5 GB)
         "nllb600m": dict(d_model=1024, layers=12, heads=16, ffn=4096, entries=256_206)}

_OPEN = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
torch.set_num_threads(1)
which, folder, sentence = sys.argv[1:4]
if which == "attnviz":
    from attnviz.engine.loading import load_translator
    from attnviz.engine.config import DecodeConfig
    import attnviz.engine.translator  # what loading imports on first use: import time, as transformers' is
    t1 = time.perf_counter()
    translator = load_translator(folder)
    t2 = time.perf_counter()
    translator.translate_batch([sentence], DecodeConfig(max_len=1))
elif which == "transformers":
    from transformers import MarianMTModel, MarianTokenizer
    t1 = time.perf_counter()
    tokenizer = MarianTokenizer.from_pretrained(folder)
    model = MarianMTModel.from_pretrained(folder).eval()
    t2 = time.perf_counter()
    with torch.inference_mode():
        model.generate(**tokenizer([sentence], return_tensors="pt"), max_new_tokens=1, num_beams=1)
else:  # an NLLB-shaped folder: transformers' M2M100 network, fed ids (its tokenizer is not what is measured)
    from transformers import M2M100ForConditionalGeneration
    t1 = time.perf_counter()
    model = M2M100ForConditionalGeneration.from_pretrained(folder).eval()
    t2 = time.perf_counter()
    with torch.inference_mode():
        model.generate(torch.tensor([[5, 6, 7, 2]]), max_new_tokens=1, num_beams=1)
t3 = time.perf_counter()
with open("/proc/self/status") as status:  # VmHWM: this program's peak (ru_maxrss counts the parent's, pre-exec)
    peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "first_token_s": t3 - t2, "peak_mib": peak_kib / 1024}))
"""

_HF_TRANSLATE = r"""
import sys, torch
torch.set_num_threads(1)
from transformers import MarianMTModel, MarianTokenizer
folder, sentence, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
tokenizer = MarianTokenizer.from_pretrained(folder)
model = MarianMTModel.from_pretrained(folder).eval()
with torch.inference_mode():
    out = model.generate(**tokenizer([sentence], return_tensors="pt"), max_new_tokens=tokens, num_beams=1)
print(tokenizer.batch_decode(out, skip_special_tokens=True)[0])
"""

# one thread through OMP_NUM_THREADS (``_env``), which torch and OpenBLAS read: importing torch here would time it on
# the plain runtime's path, which never imports it; the peak is the program's own VmHWM, written as PEAK_KIB at exit
_ATTNVIZ = ("import atexit, sys\n"
            "def _peak():\n"
            "    with open('/proc/self/status') as status:\n"
            "        sys.stderr.write(''.join('PEAK_KIB ' + line.split()[1] + chr(10) for line in status "
            "if line[:6] == 'VmHWM:'))\n"
            "atexit.register(_peak)\n"
            "from attnviz.cli.main import main\n"
            "sys.exit(main())")


def _env(root: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                                                                             "OPENBLAS_NUM_THREADS": "1"}
    return env | {"PYTHONPATH": str(root or ROOT)}


def open_probe(which: str, folder: Path, root: Path | None = None) -> dict[str, float]:
    """Open ``folder`` with ``which`` in a fresh interpreter (see the module's docstring)."""
    out = subprocess.run([sys.executable, "-c", _OPEN, which, str(folder), SENTENCE], capture_output=True, text=True,
                         env=_env(root), cwd=root or ROOT)
    if out.returncode != 0:
        raise SystemExit(f"opening with {which} failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def cold_translate(which: str, folder: Path, root: Path | None = None, tokens: int = 20) -> dict[str, float]:
    """The whole translate command, cold (see the module's docstring)."""
    if which == "attnviz":
        command = [sys.executable, "-c", _ATTNVIZ, "translate", "-m", str(folder), "--beam", "1", "--max-len",
                   str(tokens), SENTENCE]
    else:
        command = [sys.executable, "-c", _HF_TRANSLATE, str(folder), SENTENCE, str(tokens)]
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(root),
                             cwd=root or ROOT)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        err = child.stderr.read().decode() if child.stderr else ""
        raise SystemExit(f"translating with {which} failed: {err[-2000:]}")
    err = child.stderr.read().decode() if child.stderr else ""
    peaks = [int(line.split()[1]) for line in err.splitlines() if line.startswith("PEAK_KIB ")]
    return {"wall_s": wall, "peak_mib": (peaks[-1] if peaks else usage.ru_maxrss) / 1024}


def marian_folder(folder: Path, size: str = "marian") -> Path:
    """The random MarianMT folder of ``size`` (``SIZES``), written once, by a child process: this one stays small,
    since on Linux a child's ru_maxrss starts from its parent's resident size at the fork."""
    if not (folder / "model.safetensors").exists():
        writer = "write_fairseq_folder" if size.startswith("nllb") else "write_marian_folder"
        code = (f"import sys; from pathlib import Path; from tests.folder_samples import {writer}; "
                f"{writer}(Path(sys.argv[1]), **{SIZES[size]!r})")
        subprocess.run([sys.executable, "-c", code, str(folder)], check=True, env=_env(None), cwd=ROOT)
    return folder
