"""Weights that crash or silently fail (issue 38): an integer tensor where a float weight is expected, in a
checkpoint file and in every folder family, is refused in one line by the shared check (``checkpoints.assign``);
finite weights scaled to 1e38 are refused at loading (their output overflows) instead of translating into <unk>s
with exit 0, and ``--int8`` refuses a layer whose weights no int8 scale can hold instead of crashing in the
quantiser."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from attnviz.cli.main import main
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import CheckpointError, InputError
from attnviz.engine.loading import load_translator
from attnviz.engine.models.quantize import quantize_int8
from attnviz.engine.search.rules import log_probs
from tests.folder_samples import SAMPLES
from tests.helpers import make_toy_translator

WEIGHT = "must be floating point (float32, float16 or bfloat16)"


def _rewrite(path, change) -> None:
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    tensors = load_file(path)
    for name in list(tensors):
        tensors[name] = change(name, tensors[name])
    save_file(tensors, path, metadata=metadata)


@pytest.fixture()
def toy_file(tmp_path):
    path = tmp_path / "toy.safetensors"
    make_toy_translator().save(path, name="toy")
    return path


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_an_integer_weight_in_a_checkpoint_file_is_one_line(toy_file, dtype, capsys):
    _rewrite(toy_file, lambda name, t: t.to(dtype) if name == "decoder.0.cross_attn.out_proj.weight" else t)
    with pytest.raises(CheckpointError) as err:
        load_translator(toy_file)
    assert str(err.value) == (f"{toy_file}: decoder.0.cross_attn.out_proj.weight is stored as {str(dtype)[6:]}, but "
                              f"it is a weight and {WEIGHT}; the file is not a model's weights, or was written "
                              "wrongly.")
    for precision in ("float32", "float16", "bfloat16"):
        assert main(["translate", "-m", str(toy_file), "--dtype", precision, "q1 q2"]) == 1
        err_text = capsys.readouterr().err
        assert WEIGHT in err_text and "Traceback" not in err_text and len(err_text.strip().splitlines()) == 1


@pytest.mark.parametrize("family", sorted(SAMPLES))
def test_an_integer_weight_in_any_folder_family_is_one_line(family, tmp_path, capsys):
    folder = SAMPLES[family](tmp_path / family.replace("/", "-"))
    ffn = ("fc1.weight", "mlp.up_proj.weight")  # the first feed-forward weight, as each family names it
    _rewrite(folder / "model.safetensors", lambda name, t: t.to(torch.int64) if name.endswith(ffn) else t)
    with pytest.raises(CheckpointError, match=r"\.weight is stored as int64, but it is a weight and must be "
                                              r"floating point") as err:
        load_translator(folder)
    assert str(err.value).startswith(f"{folder}: ") and "\n" not in str(err.value)


def test_weights_scaled_to_1e38_are_refused_not_translated_into_nothing(toy_file, capsys):
    _rewrite(toy_file, lambda name, t: t / t.abs().max().clamp_min(1e-30) * 1e38 if t.is_floating_point() else t)
    assert torch.isfinite(load_file(toy_file)["decoder.0.ff.0.weight"]).all()  # finite, every one
    for extra in ([], ["--int8"]):
        assert main(["translate", "-m", str(toy_file), *extra, "q1 q2"]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (f"attnviz: error: {toy_file}: the network's output overflows at float32 (inf or NaN "
                                "for a one-token input); its weights reach 1e+38, too large to compute with. The "
                                "weights are damaged or wrongly scaled.\n")


def test_int8_refuses_weights_whose_range_overflows_instead_of_crashing():
    translator = make_toy_translator()
    with torch.no_grad():
        weight = translator.model.get_parameter("decoder.0.ff.0.weight")
        weight[0, 0], weight[0, 1] = 3e38, -3e38  # finite, but max - min is inf
    with pytest.raises(InputError) as err:
        quantize_int8(translator.model)
    assert str(err.value) == ("--int8 cannot quantise decoder.0.ff.0: its weights reach 3e+38, a range no int8 scale "
                              "can hold (overflowing or damaged weights). Check the model's weights")


def test_a_step_whose_output_is_not_a_number_says_so():
    logits = torch.zeros(1, 8)
    logits[0, 3] = float("nan")
    with pytest.raises(CheckpointError, match=r"^the model's output is not a number \(inf or NaN\) at float32"):
        log_probs(logits, DecodeConfig())
    logits[0, 3] = float("-inf")  # a banned token is not an overflow
    assert torch.isfinite(log_probs(logits, DecodeConfig())[0, 4])
