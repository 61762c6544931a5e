"""`attnviz generate`: a language model continues a prefix; each command refuses the other kind of model."""

import json

import numpy as np
import pytest

from attnviz.cli.main import main
from tests.helpers import make_toy_lm, train_toy_lm


@pytest.fixture(scope="module")
def lm_path(tmp_path_factory):
    translator = make_toy_lm(seed=2)
    train_toy_lm(translator, steps=400)
    path = tmp_path_factory.mktemp("lm") / "letters.safetensors"
    translator.save(path, name="letters", metrics={"val": {"loss": 0.5, "ppl": 1.65, "accuracy": 0.8}})
    return str(path)


def test_greedy_generation_continues_the_prefix(lm_path, capsys):
    assert main(["generate", "-m", lm_path, "--prefix", "cd", "--n", "2", "--temperature", "0"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cde") and "greedy" in out.err  # greedy: one sequence


def test_sampling_is_reproducible_with_a_seed(lm_path, capsys):
    args = ["generate", "-m", lm_path, "--n", "6", "--temperature", "1.5", "--seed", "9", "--json"]
    assert main(args) == 0
    first = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(args) == 0
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert first == again and len(first) == 6
    for obj in first:
        assert obj["text"] == "".join(obj["tokens"]) and obj["prefix"] == ""
        assert len(obj["probabilities"]) == len(obj["tokens"]) + obj["ended"]
        assert all(0 < p <= 1 for p in obj["probabilities"])


def test_top_k_one_samples_the_greedy_sequence_at_any_temperature(lm_path, capsys):
    assert main(["generate", "-m", lm_path, "--prefix", "cd", "--temperature", "0"]) == 0
    greedy = capsys.readouterr().out.splitlines()
    assert main(["generate", "-m", lm_path, "--prefix", "cd", "--n", "4", "--temperature", "3", "--top-k", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == greedy * 4
    assert main(["generate", "-m", lm_path, "--prefix", "cd", "--n", "4", "--temperature", "3",
                 "--top-p", "0.000001"]) == 0  # the most probable token alone holds the mass
    assert capsys.readouterr().out.splitlines() == greedy * 4


def test_generate_saves_attention(lm_path, tmp_path, capsys):
    out = tmp_path / "att.npz"
    assert main(["generate", "-m", lm_path, "--n", "2", "--attention", str(out), "--prefix", "b"]) == 0
    data = np.load(out, allow_pickle=False)
    decoder = [k for k in data.files if k.endswith("decoder")]
    assert len(decoder) == 2 and not any(k.endswith(("cross", "encoder")) for k in data.files)
    np.testing.assert_allclose(data[decoder[0]].sum(-1), 1, atol=1e-5)


def test_generate_refuses_bad_values_and_translation_models(lm_path, tmp_path, capsys, trained_translator):
    bad_values = (["--temperature", "-1"], ["--n", "0"], ["--top-p", "0"], ["--top-p", "1.5"], ["--top-k", "-2"])
    for bad in bad_values:  # bad option values are usage errors (issue 16)
        with pytest.raises(SystemExit) as exit_info:
            main(["generate", "-m", lm_path, *bad])
        assert exit_info.value.code == 2 and bad[0] in capsys.readouterr().err
    path = tmp_path / "toy.safetensors"
    trained_translator.save(path)
    assert main(["generate", "-m", str(path)]) == 2
    assert "attnviz translate" in capsys.readouterr().err
    assert main(["translate", "-m", lm_path, "abc"]) == 2
    assert "attnviz generate" in capsys.readouterr().err


def test_info_and_evaluate_describe_a_language_model(lm_path, capsys):
    assert main(["info", lm_path, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "char-lm" and info["attention_kinds"] == ["decoder"]
    assert info["metrics"]["val"]["loss"] == 0.5 and "language model" in info["languages"]
    assert main(["info", lm_path]) == 0
    text = capsys.readouterr().out
    assert "char-lm" in text and "loss 0.5" in text


def _with_recipe_decoding(translator, path, temperature: float, seed: int) -> str:
    from attnviz.engine.training.presets import get_preset

    recipe = get_preset("names-char").to_dict()
    recipe["decode"] = dict(recipe["decode"], temperature=temperature, seed=seed)
    translator.save(path, name="letters", recipe=recipe)
    return str(path)


def test_generate_defaults_to_the_decoding_of_the_models_recipe(lm_path, tmp_path, capsys):
    from attnviz.engine.loading import load_translator

    translator = load_translator(lm_path)
    sampled = _with_recipe_decoding(translator, tmp_path / "sampled.safetensors", 1.5, 9)
    assert main(["generate", "-m", sampled, "--n", "4"]) == 0
    by_recipe = capsys.readouterr().out
    assert main(["generate", "-m", lm_path, "--n", "4", "--temperature", "1.5", "--seed", "9"]) == 0
    assert by_recipe == capsys.readouterr().out  # the recipe's temperature and seed, not 1.0 and 0
    assert main(["generate", "-m", lm_path, "--n", "4"]) == 0  # no recipe stored: temperature 1.0, seed 0
    assert by_recipe != capsys.readouterr().out
    greedy = _with_recipe_decoding(translator, tmp_path / "greedy.safetensors", 0.0, 0)
    assert main(["generate", "-m", greedy, "--n", "3", "--prefix", "cd"]) == 0
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == 1 and "greedy" in out.err
    assert main(["generate", "-m", greedy, "--n", "3", "--temperature", "1.0"]) == 0  # a flag wins over the recipe
    assert len(capsys.readouterr().out.splitlines()) == 3
