"""Option values that were echoed whole, written raw or misnamed, and cuts nobody was told of (issue 38): a
5,000-character --method (or foil, or corrupted sentence) is cut in its message; --json escapes U+2028, U+2029 and
U+0085, which line readers split on; --layer 99 --head 1 says the layer is out of range instead of "give both"; a
folder without max_length (transformers' default 20, the end token forced at the last step) says every time a
translation stops at that limit."""

from __future__ import annotations

import json

import pytest

from attnviz.cli.jsonout import json_text
from attnviz.cli.main import main
from tests.folder_samples import write_marian_folder
from tests.helpers import make_toy_translator

LONG = "x" * 5000
CUT = "xxxxxxxxxxxxxxxxxxxx...xxxxxxxx"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("values") / "toy.safetensors"
    make_toy_translator().save(path, name="toy")
    return str(path)


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 400, err[:500]
    return err


def test_a_5000_character_method_is_cut_in_its_message(model, capsys):
    assert main(["attribute", "-m", model, "--method", LONG, "q1 q2"]) == 2
    assert _error(capsys).startswith(f"attnviz: error: --method: unknown method '{CUT}'; choose one of saliency, ")


@pytest.mark.parametrize("option", [["--method", "saliency", "--foil", LONG],
                                    ["--method", "saliency", "--target", LONG],
                                    ["--method", "patching", "--corrupt", LONG]])
def test_other_long_values_are_cut_too(model, option, capsys):
    main(["attribute", "-m", model, *option, "q1 q2"])
    assert CUT in _error(capsys)


@pytest.mark.parametrize("command", ["translate", "generate"])
@pytest.mark.parametrize("option, choices", [("--dtype", "auto, float32, float16, bfloat16"),
                                             ("--device", "cpu, cuda, auto")])
@pytest.mark.parametrize("value, shown", [(LONG, CUT), ("", ""), ("CUDA", "CUDA"), ("float32 ", "float32 "),
                                          ("cpu\n", "cpu\\n")])
def test_a_choice_option_refuses_every_other_value_in_one_line(model, capsys, command, option, choices, value, shown):
    """--dtype and --device take exactly one of their names: case, spaces, a newline, nothing or 5,000 characters
    are usage errors (exit 2) naming the choices, before any model is read."""
    with pytest.raises(SystemExit) as exited:
        main([command, "-m", model, option, value, "q1"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"argument {option}: expected one of {choices}, not '{shown}'")


def test_json_escapes_the_characters_line_readers_split_on(model, capsys, monkeypatch):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("q1\u2028q2 \u0085 q3\u2029\n".encode()),
                                                       encoding="utf-8"))
    main(["translate", "-m", model, "--json"])
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and len(out.splitlines()) == 1  # str.splitlines splits on all three
    assert "\u2028" not in out and "\u0085" not in out and "\u2029" not in out
    assert '"source": "q1\\u2028q2 \\u0085 q3\\u2029"' in out
    assert json.loads(out)["source"] == "q1\u2028q2 \u0085 q3\u2029"
    assert json_text({"a": "\u2028"}, ensure_ascii=False) == '{"a": "\\u2028"}'


def test_a_layer_out_of_range_is_said_as_such(model, tmp_path, capsys):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("q1 q2 ||| w2 w1\n", encoding="utf-8")
    assert main(["align", "-m", model, "--text", str(pairs), "--layer", "99", "--head", "1"]) == 2
    assert _error(capsys) == ("attnviz: error: --layer 99 is out of range: this model has 2 cross-attention layers "
                              "(1..2)\n")
    assert main(["align", "-m", model, "--text", str(pairs), "--layer", "1", "--head", "9"]) == 2
    assert _error(capsys) == ("attnviz: error: --head 9 is out of range: this model has 4 cross-attention heads per "
                              "layer (1..4)\n")
    assert main(["align", "-m", model, "--text", str(pairs), "--layer", "1"]) == 2
    assert "give both --layer (1..2) and --head (1..4)" in _error(capsys)


@pytest.mark.parametrize("extra", [[], ["--n-best", "2"], ["--beam", "1"]])
def test_a_folder_without_max_length_says_each_translation_stopped_at_the_limit(extra, tmp_path, capsys):
    folder = write_marian_folder(tmp_path / "opus-mt-de-en")  # random weights: never chooses its end
    settings = json.loads((folder / "generation_config.json").read_text())
    del settings["max_length"]
    (folder / "generation_config.json").write_text(json.dumps(settings))
    main(["translate", "-m", str(folder), *extra, "haus hund katze mann frau kind spielt"])
    err = capsys.readouterr().err
    assert "at most 19 tokens" in err and "forced end token" in err
    assert ("warning: line 1: the translation reached the limit of 19 tokens, where the model's settings force the "
            "end token, and may be cut there (raise --max-len to let it finish)\n") in err
