"""The command line, run in-process through ``main`` and, for exit codes and streams, as a real subprocess."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from attnviz.cli.main import main
from attnviz.engine.export import model_name
from tests.folder_samples import write_fairseq_folder


@pytest.fixture(scope="module")
def model_path(tmp_path_factory, trained_translator):
    path = tmp_path_factory.mktemp("cli") / "toy.safetensors"
    trained_translator.save(path, name="toy", metrics={"test": {"bleu_tok": 12.5}})
    return str(path)


def run(*args, stdin=""):
    return subprocess.run([sys.executable, "-m", "attnviz", *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


def test_translate_arguments(model_path, capsys):
    assert main(["translate", "-m", model_path, "q1 q2 q3", "q4"]) == 0
    assert capsys.readouterr().out.splitlines() == ["w3 w2 w1", "w4"]


def test_a_model_given_without_dash_m_is_refused_not_translated(model_path, tmp_path, capsys):
    """A newcomer's `attnviz translate MODEL "sentence"` used to translate the model's path as words."""
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    for given in (model_path, str(folder)):
        assert main(["translate", given, "q1 q2"]) == 2
        err = capsys.readouterr().err
        assert f"{given} looks like a model, not a sentence: give it with -m" in err
        assert f"attnviz translate -m {given}" in err


def test_translate_json(model_path, capsys):
    assert main(["translate", "-m", model_path, "--json", "q1 q2"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["src_tokens"] == ["<sos>", "q1", "q2", "<eos>"] and obj["tokens"] == ["w2", "w1"]
    assert obj["text"] == "w2 w1" and obj["source"] == "q1 q2"


def test_translate_stdin_keeps_lines_aligned(model_path):
    out = run("translate", "-m", model_path, stdin="q1 q2\n\nq5 q6 q7\n")
    assert out.returncode == 0
    assert out.stdout.splitlines() == ["w2 w1", "", "w7 w6 w5"]
    assert "empty line" in out.stderr


@pytest.mark.parametrize("args,stdin", [(["   "], ""), ([], "  \n\t\n")])
def test_empty_input_exits_2_with_a_message(model_path, args, stdin):
    out = run("translate", "-m", model_path, *args, stdin=stdin)
    assert out.returncode == 2
    assert "attnviz: error:" in out.stderr and "Traceback" not in out.stderr


def test_unicode_never_crashes(model_path):
    out = run("translate", "-m", model_path, "--json", "q1 \U0001f600 \u05e9\u05dc\u05d5\u05dd \x1b q2")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["tokens"]
    assert "<unk>" in out.stderr


def test_attention_export_loads_without_pickle(model_path, tmp_path, capsys):
    npz = tmp_path / "att.npz"
    assert main(["translate", "-m", model_path, "--attention", str(npz), "q1 q2", "q3 q4 q5"]) == 0
    data = np.load(npz)  # allow_pickle=False by default
    assert data["s0_cross"].shape == (2, 4, 3, 4)
    assert list(data["s1_src_tokens"]) == ["<sos>", "q3", "q4", "q5", "<eos>"]
    np.testing.assert_allclose(data["s1_encoder"].sum(-1), 1, atol=1e-5)
    sidecar = json.loads(npz.with_suffix(".json").read_text())
    assert sidecar["translations"][1]["shapes"]["decoder"] == [2, 4, 4, 4]
    assert sidecar["model"]["name"] == "toy" and "path" not in sidecar["model"]
    assert os.path.dirname(model_path) not in npz.with_suffix(".json").read_text()  # where the user keeps files
    assert model_name({"name": "", "path": "/home/someone/models/de-en.safetensors"}) == "de-en.safetensors"
    assert model_name({"path": "/home/someone/opus-mt-de-en"}) == "opus-mt-de-en"


def test_info_json_shows_stored_metrics(model_path):
    out = run("info", model_path, "--json")
    info = json.loads(out.stdout)
    assert info["metrics"]["test"]["bleu_tok"] == 12.5 and info["model"]["d_model"] == 32
    assert info["src_lang"] == "de" and info["tgt_lang"] == "en"


def test_info_human_readable(model_path, capsys):
    assert main(["info", model_path]) == 0
    text = capsys.readouterr().out
    assert "German -> English" in text and "bleu_tok 12.5" in text


def test_bad_checkpoint_is_one_clear_line(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_text("not a model")
    out = run("translate", "-m", str(bad), "Hallo")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip() == (f"attnviz: error: {bad} is not a safetensors file "
                                  "(its first bytes are not a safetensors header).")


def test_help_lists_the_commands():
    out = run("--help")
    assert out.returncode == 0
    for command in ("gui", "translate", "info", "train", "evaluate", "presets", "data"):
        assert command in out.stdout


@pytest.mark.parametrize(("family", "count", "first", "tgt"), [
    ("nllb", 202, "ace_Arab, ace_Latn, acm_Arab", "eng_Latn"), ("m2m100", 100, "__af__, __am__, __ar__", "__en__"),
    ("mbart50", 52, "ar_AR, cs_CZ, de_DE", "en_XX")])
def test_info_lists_a_multilingual_models_language_tags_and_how_to_pick(tmp_path, capsys, family, count, first, tgt):
    folder = write_fairseq_folder(tmp_path / family, family)
    assert main(["info", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    tags = next(i for i, line in enumerate(lines) if line.startswith("  languages"))
    assert lines[tags].startswith(f"  languages  {count} tags: {first}, ") and f"({count - 8} more)" in lines[tags]
    assert lines[tags + 1].strip() == (f"into {tgt} by default, from: guessed from the text; pick with --src-lang and "
                                       "--tgt-lang (an ISO code such as de or fra, or a tag)")
    assert main(["info", str(folder), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["language_tags"]["tags"]) == count


def test_info_of_a_model_of_one_pair_lists_no_language_tags(model_path, capsys):
    assert main(["info", model_path]) == 0
    assert "languages " not in capsys.readouterr().out
