"""The opt-in int8 path (``engine.models.quantize``, ``--int8`` on ``translate`` and ``evaluate``): it translates,
keeps the float32 model's choices on a trained toy model, captures the int8 network's attention, and refuses what
it cannot run with one line."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from torch import nn

from attnviz.cli.main import main
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import InputError
from attnviz.engine.events import BeamStep
from attnviz.engine.models.quantize import is_int8, quantize_int8, quantized_layers
from tests.helpers import make_toy_translator

SENTENCES = ["q1 q2 q3", "q4 q5", "q6 q7 q8 q9 q10", "q11 q0 q1"]


@pytest.fixture(scope="module")
def pair(trained_translator):
    """The trained toy model and an int8 copy of it."""
    quantized = copy.deepcopy(trained_translator)
    quantize_int8(quantized.model)
    return trained_translator, quantized


def test_every_linear_layer_is_int8_and_the_rest_float32(pair):
    full, quantized = pair
    assert not is_int8(full.model) and is_int8(quantized.model)
    assert not any(type(m) is nn.Linear for m in quantized.model.modules())
    assert {p.dtype for p in quantized.model.parameters()} == {torch.float32}  # embeddings and norms


def test_int8_translates_as_the_float_model_chooses(pair):
    full, quantized = pair
    for beam in (1, 3):
        decode = DecodeConfig(beam=beam)
        expected = full.translate_batch(SENTENCES, decode)
        assert quantized.translate_batch(SENTENCES, decode) == expected and all(expected)


def test_int8_beam_captures_its_own_attention(pair):
    full, quantized = pair
    nodes = [n for e in quantized.beam_steps(SENTENCES[0], DecodeConfig(beam=3)) if isinstance(e, BeamStep)
             for n in e.nodes]
    rows = np.stack([n.step.cross_attention for n in nodes])  # [nodes, L, H, S]
    np.testing.assert_allclose(rows.sum(-1), 1.0, rtol=1e-5)
    first = full.translate(SENTENCES[0]).attention["cross"]
    int8 = quantized.translate(SENTENCES[0]).attention["cross"]
    assert first.shape == int8.shape and not np.array_equal(first, int8)  # the int8 network's, not a copy
    np.testing.assert_allclose(first, int8, atol=0.1)


def test_half_precision_and_other_devices_are_refused():
    translator = make_toy_translator(seed=0)
    translator.model.half()
    with pytest.raises(InputError, match=r"^--int8 quantises float32 weights; this model is loaded in float16\. "
                                         r"Load it in float32 \(drop --dtype\) to use --int8$"):
        quantize_int8(translator.model)
    translator.model.to("meta")
    with pytest.raises(InputError, match="^--int8 runs on the CPU only"):
        quantize_int8(translator.model)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory, trained_translator):
    path = tmp_path_factory.mktemp("int8") / "toy.safetensors"
    trained_translator.save(path, name="toy")
    return str(path)


def test_translate_and_evaluate_take_int8(model_path, tmp_path, capsys, pair):
    full, _ = pair
    assert main(["translate", "-m", model_path, "--int8", "--beam", "2", *SENTENCES[:2]]) == 0
    assert capsys.readouterr().out.splitlines() == full.translate_batch(SENTENCES[:2], DecodeConfig(beam=2))
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("\n".join(SENTENCES) + "\n")
    ref.write_text("\n".join(full.translate_batch(SENTENCES)) + "\n")
    assert main(["evaluate", "-m", model_path, "--src", str(src), "--ref", str(ref), "--int8", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["precision"] == "int8 linear layers (dynamic quantisation)"
    assert report["bleu_tok"] == pytest.approx(100.0)


def test_the_output_projection_is_int8_and_the_card_says_so(pair):
    full, quantized = pair
    assert "out_proj" in quantized_layers(quantized.model) and quantized_layers(full.model) == []
    assert "int8" not in full.info
    assert quantized.info["int8"].startswith(f"{len(quantized_layers(quantized.model))} linear layers in int8: ")
    assert "and the output projection (out_proj)" in quantized.info["int8"]
