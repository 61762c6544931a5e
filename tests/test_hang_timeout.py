"""A hung test fails in its own timeout and the run goes on (issue 38): the suite runs under pytest-timeout with
the per-test limit set in pyproject.toml, so a hang (a modal question nobody answers, a join on a thread that never
ends) costs one test, not the whole CI job. Shown on a run of two tests in a subprocess: one waits forever."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HUNG = '''
import threading

def test_hangs():
    threading.Event().wait()  # nothing ever sets it

def test_after_the_hang():
    assert True
'''


def test_the_suite_has_a_per_test_timeout():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert options["timeout"] == 300 and options["timeout_method"] == "signal"


def test_a_hung_test_fails_in_its_timeout_and_the_run_goes_on(tmp_path):
    (tmp_path / "test_hung.py").write_text(textwrap.dedent(HUNG))
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 2\ntimeout_method = signal\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:pytestqt",
                             str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Failed: Timeout (>2.0s) from pytest-timeout" in result.stdout
    assert "1 failed, 1 passed" in result.stdout  # the test after the hung one still ran
