"""``attnviz translate`` on a terminal: a progress line on stderr while a batch decodes (an LLM may take minutes
over a long answer), erased before the output; nothing of it in a log or a pipe. An LLM folder whose generation
config names no answer length stops at 128 tokens, and says so."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest

from attnviz.engine.hub.llm_files import DEFAULT_NEW_TOKENS


@pytest.fixture(scope="module")
def model_path(tmp_path_factory, trained_translator):
    path = tmp_path_factory.mktemp("progress") / "toy.safetensors"
    trained_translator.save(path, name="toy")
    return str(path)


def run_on_a_terminal(*args: str) -> tuple[int, str, str]:
    """Run attnviz with stderr on a pseudo-terminal and stdout piped: (exit status, stdout, what the terminal got)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "attnviz", *args], stdout=subprocess.PIPE, stderr=follower,
                            env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the other end closed: the process is done writing
            break
        if not chunk:
            break
        seen += chunk
    out = proc.stdout.read().decode() if proc.stdout else ""
    os.close(leader)
    return proc.wait(timeout=120), out, seen.decode(errors="replace")


def test_a_terminal_sees_the_decode_progress_and_then_only_the_answer(model_path):
    code, out, terminal = run_on_a_terminal("translate", "-m", model_path, "q1 q2", "q3 q4 q5")
    assert code == 0 and out.splitlines() == ["w2 w1", "w5 w4 w3"]
    assert "translating: 0/2 sentences done, step 1 of at most " in terminal
    assert terminal.rstrip().endswith("\r\x1b[K")  # erased: the terminal is left as the output needs it


def test_a_log_or_a_pipe_gets_no_progress_line(model_path):
    done = subprocess.run([sys.executable, "-m", "attnviz", "translate", "-m", model_path, "q1 q2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "w2 w1\n" and "translating:" not in done.stderr


def test_an_llm_folder_naming_no_answer_length_stops_at_128_tokens_and_says_so(tmp_path):
    pytest.importorskip("transformers")
    from attnviz.engine.loading import load_translator
    from tests.llm_folder import make_llm_folder

    folder = make_llm_folder(tmp_path, "qwen2")
    generation = json.loads((folder / "generation_config.json").read_text())
    generation.pop("max_new_tokens", None)
    (folder / "generation_config.json").write_text(json.dumps(generation))
    card = load_translator(str(folder)).card
    assert DEFAULT_NEW_TOKENS == 128 and card.decoding is not None and card.decoding.max_len == 128
    assert any("answers stop after 128 tokens (--max-len)" in note for note in card.generation["notes"])
