"""Inputs past the model's positions are refused with the limit, not worked on for minutes (issue 38): align on a
5,000-word pair took 233 s (its word-by-word maps grow with the square of the length) and integrated gradients on a
5,000-word sentence 379 s, both on words the model never reads."""

from __future__ import annotations

import pytest

from attnviz.cli.main import main
from attnviz.engine.errors import InputError
from tests.helpers import make_toy_translator

WORDS = 5000


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("long") / "toy.safetensors"
    make_toy_translator().save(path, name="toy")
    return str(path)


def _long(prefix: str, n: int = WORDS) -> str:
    return " ".join(f"{prefix}{i % 10 + 1}" for i in range(n))


@pytest.mark.parametrize("side", ["source", "target"])
def test_align_refuses_a_pair_past_the_positions_with_the_limit(model, side, tmp_path, capsys):
    source, target = (_long("q"), "w1 w2") if side == "source" else ("q1 q2", _long("w"))
    pairs = tmp_path / "pairs.txt"
    pairs.write_text(f"q1 q2 ||| w2 w1\n{source} ||| {target}\n", encoding="utf-8")
    assert main(["align", "-m", model, "--text", str(pairs)]) == 2
    assert capsys.readouterr().err == (f"attnviz: error: sentence 2: the {side} is 5,000 tokens long (5,000 words), "
                                       "more than the 22 this model reads at once (its positions); split the pair "
                                       "into shorter ones, or leave it out\n")


def test_align_reads_a_pair_that_fills_the_positions(model, tmp_path, capsys):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text(f"{_long('q', 22)} ||| {_long('w', 22)}\n", encoding="utf-8")
    assert main(["align", "-m", model, "--text", str(pairs)]) == 0


@pytest.mark.parametrize("method", ["integrated-gradients", "logit-lens"])
def test_attribute_refuses_a_sentence_past_the_positions_with_the_limit(model, method, capsys):
    assert main(["attribute", "-m", model, "--method", method, _long("q")]) == 2
    what = "an attribution" if method != "logit-lens" else "a logit lens"
    assert capsys.readouterr().err == ("attnviz: error: The sentence has 5,000 tokens but the model reads at most 22 "
                                       f"(its positions); {what} of the first 22 would not be one of the sentence "
                                       "given. Shorten it to at most 22 tokens.\n")


def test_the_limit_is_the_models_own():
    translator = make_toy_translator()
    translator.refuse_beyond_positions(_long("q", 22), "an attribution")  # exactly what it reads: accepted
    with pytest.raises(InputError, match="has 23 tokens but the model reads at most 22"):
        translator.refuse_beyond_positions(_long("q", 23), "an attribution")
