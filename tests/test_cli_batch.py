"""Batch translation of hostile input: one output line per input line, valid UTF-8 JSON, usage errors exit 2."""

import json
import os
import subprocess
import sys

import pytest

from attnviz.cli.main import main

HOSTILE = [  # (raw line, translatable)
    (b"q1 q2", True),
    (b"\x01\x02\x03", False),  # only control characters
    (b"\x00", False),  # NUL
    ("\u200b".encode(), False),  # a zero-width space
    (b"q3 \xff\xfe q4", False),  # invalid UTF-8
    (b"", None),  # blank: stays blank, not a failure
    (b"q5 q6 q7", True),
    (b"\xc3", False),  # a truncated multi-byte character
    ("q1 \U0001f600".encode(), True),
]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory, trained_translator):
    path = tmp_path_factory.mktemp("batch") / "toy.safetensors"
    trained_translator.save(path, name="toy")
    return str(path)


def run(*args, stdin: bytes = b""):
    env = dict(os.environ, LANG="C", LC_ALL="C", PYTHONIOENCODING="")  # a locale that is not UTF-8
    return subprocess.run([sys.executable, "-m", "attnviz", *args], input=stdin, capture_output=True, timeout=120,
                          env=env, check=False)


def test_every_hostile_line_gets_exactly_one_output_line(model_path):
    out = run("translate", "-m", model_path, stdin=b"\n".join(raw for raw, _ in HOSTILE) + b"\n")
    assert out.returncode == 1, out.stderr  # some lines failed
    lines = out.stdout.decode("utf-8").split("\n")
    assert lines[-1] == "" and len(lines[:-1]) == len(HOSTILE)
    for (raw, ok), text in zip(HOSTILE, lines):
        assert bool(text) == bool(ok), (raw, text)
    err = out.stderr.decode("utf-8")
    for number, (_, ok) in enumerate(HOSTILE, 1):
        assert (f"line {number}: not translated" in err) == (ok is False), number
    assert "line 5: not translated: not valid UTF-8 (byte 0xff at position 3)" in err
    assert "\ufffd" not in err and "Traceback" not in err
    assert "5 of 9 line(s) could not be translated" in err


def test_json_output_is_valid_utf8_with_an_error_object_per_bad_line(model_path):
    out = run("translate", "-m", model_path, "--json", stdin=b"\n".join(raw for raw, _ in HOSTILE))
    assert out.returncode == 1
    objects = [json.loads(line) for line in out.stdout.decode("utf-8", errors="strict").splitlines()]
    assert [o["line"] for o in objects] == list(range(1, len(HOSTILE) + 1))
    for (_raw, ok), obj in zip(HOSTILE, objects):
        assert ("error" in obj) == (ok is False), obj
    assert objects[4] == {"line": 5, "error": "not valid UTF-8 (byte 0xff at position 3); the line was not read"}
    assert objects[8]["source"] == "q1 \U0001f600" and objects[0]["tokens"] == ["w2", "w1"]
    # the blank line's record says what stderr says of it
    assert objects[5]["text"] == "" and objects[5]["warnings"] == ["empty line left untranslated"]
    assert out.stderr.decode("utf-8").count("line 6: empty line left untranslated") == 1


def test_undecodable_argument_bytes_are_reported_never_echoed(model_path):
    out = subprocess.run([sys.executable, "-m", "attnviz", "translate", "-m", model_path, "--json",
                          b"q1 \xff q2", "q1 q2"], capture_output=True, timeout=120, check=False)
    assert out.returncode == 1
    first, second = (json.loads(line) for line in out.stdout.decode("utf-8").splitlines())
    assert "error" in first and "byte 0xff" in first["error"] and second["tokens"] == ["w2", "w1"]
    assert b"\xff" not in out.stdout


def test_all_good_lines_exit_0(model_path, capsys, monkeypatch):
    assert main(["translate", "-m", model_path, "q1 q2", "q3"]) == 0
    assert capsys.readouterr().out.splitlines() == ["w2 w1", "w3"]


def test_attention_export_skips_bad_lines_but_keeps_alignment(model_path, tmp_path, capsys):
    npz = tmp_path / "att.npz"
    assert main(["translate", "-m", model_path, "--attention", str(npz), "q1 q2", "\u200b", "q3"]) == 1
    assert capsys.readouterr().out.split("\n") == ["w2 w1", "", "w3", ""]
    assert npz.exists()


@pytest.mark.parametrize("args, words", [
    (["--beam", "100000"], "must be from 1 to 64, not 100,000"),
    (["--beam", "0"], "must be from 1 to 64"),
    (["--beam", "two"], "expected a whole number"),
    (["--max-len", "0"], "must be from 1 to 1,000"),
    (["--length-penalty", "nan"], "must be a number from 0 to 10"),
    (["--length-penalty", "-1"], "must be a number from 0 to 10"),
    (["--attention", "."], "is a folder"),
    (["--attention", "no/such/folder/a.npz"], "does not exist"),
])
def test_bad_option_values_are_usage_errors(model_path, capsys, args, words):
    with pytest.raises(SystemExit) as exit_info:
        main(["translate", "-m", model_path, *args, "q1"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "usage: attnviz translate" in err and words in err


@pytest.mark.parametrize("args", [["generate", "-m", "x", "--n", "0"], ["generate", "-m", "x", "--temperature", "inf"],
                                  ["evaluate", "-m", "x", "--beam", "999"], ["train", "--max-steps", "-1"]])
def test_other_commands_check_their_values_too(capsys, args):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2 and "usage:" in capsys.readouterr().err
