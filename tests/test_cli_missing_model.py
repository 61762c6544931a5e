"""A model path that names nothing is said at once: one line, exit status 2, before torch is imported."""

import json
import subprocess
import sys

import pytest

# runs a command in a fresh interpreter and reports its status, what it printed on stderr and whether torch loaded
PROBE = """
import contextlib, io, json, sys
from attnviz.cli.main import main
err = io.StringIO()
with contextlib.redirect_stderr(err):
    rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "stderr": err.getvalue(), "torch": "torch" in sys.modules}))
"""


def run_probe(*argv: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True,
                         timeout=120)
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("argv", [("translate", "-m", "{missing}", "Guten Morgen"),
                                  ("generate", "-m", "{missing}"),
                                  ("heads", "-m", "{missing}")])
def test_a_missing_model_is_refused_before_torch(tmp_path, argv):
    missing = tmp_path / "nope" / "model.safetensors"
    result = run_probe(*[a.format(missing=missing) for a in argv])
    assert result["rc"] == 2
    assert result["stderr"] == (f"attnviz: error: {missing}: no such file or folder. Check the path, or pick one "
                                "of the bundled models.\n")
    assert result["torch"] is False


def test_loading_a_missing_model_does_not_import_torch(tmp_path):
    code = ("import sys\nfrom attnviz.engine.errors import CheckpointError\nfrom attnviz.engine.loading import "
            f"load_translator\ntry:\n    load_translator({str(tmp_path / 'x.safetensors')!r})\nexcept CheckpointError "
            "as exc:\n    print(exc)\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.splitlines() == [f"{tmp_path / 'x.safetensors'}: no such file or folder. Check the path, or "
                                       "pick one of the bundled models.", "False"]
