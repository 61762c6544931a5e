"""Loading without initialising (issue 29): a network built on the meta device and given the file's tensors equals
the one the old loading built (random initialisation, then a copy), parameter for parameter and output for output;
nothing is left on the meta device; tied weights are one tensor; the dtype asked for is the one the model runs at,
and a model too large for the available memory is refused before anything is read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from attnviz.cli.main import main
from attnviz.engine.checkpoints import memory
from attnviz.engine.checkpoints.assign import build_loaded
from attnviz.engine.checkpoints.mapped import mapping_of
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import CheckpointError, InputError
from attnviz.engine.hub.marian_files import folder_parts
from attnviz.engine.hub.marian_weights import marian_state
from attnviz.engine.loading import load_translator, read_card
from attnviz.engine.models.protocol import count_parameters, load_stored_state, stored_state
from attnviz.engine.translator import Translator, build_model
from tests.folder_samples import write_marian_folder
from tests.helpers import make_toy_lm, make_toy_translator

KINDS = ("transformer", "marian", "rnn-attention", "char-lm")
DECODE = DecodeConfig(max_len=6)


def _toy(kind: str) -> Translator:
    return make_toy_lm(seed=3) if kind == "char-lm" else make_toy_translator(seed=3, kind=kind)


def _old_loading(cfg, tensors: dict[str, torch.Tensor]) -> torch.nn.Module:
    """What loading did before: a freshly initialised network, then the tensors copied in (float32)."""
    model = build_model(cfg)
    load_stored_state(model, {k: v.float() if v.is_floating_point() else v for k, v in tensors.items()})
    return model.eval()


def _same_outputs(a: Translator, b: Translator, text: str, exact: bool = True) -> None:
    """The same translation; bit for bit, or (``exact`` False) within float32's rounding, which a weight mapped at
    an offset that is not a multiple of 64 may change in a one-row product (``engine.checkpoints.mapped``)."""
    x, y = a.translate(text, DECODE), b.translate(text, DECODE)
    assert x.tokens == y.tokens
    assert x.attention.keys() == y.attention.keys()
    if exact:
        assert x.probabilities == y.probabilities
    np.testing.assert_allclose(x.probabilities, y.probabilities, rtol=1e-5)
    for kind in x.attention:
        assert x.attention[kind].dtype == np.float32
        if exact:
            assert np.array_equal(x.attention[kind], y.attention[kind])
        np.testing.assert_allclose(x.attention[kind], y.attention[kind], rtol=1e-5, atol=1e-7)


def _on_cpu_and_finite(model: torch.nn.Module) -> None:
    tensors = [*model.named_parameters(), *model.named_buffers()]
    assert tensors
    for name, tensor in tensors:
        assert tensor.device.type == "cpu", name
        assert bool(torch.isfinite(tensor).all()), name


@pytest.mark.parametrize("kind", KINDS)
def test_a_checkpoint_loads_as_the_old_loading_did_bit_for_bit(tmp_path, kind):
    translator = _toy(kind)
    path = tmp_path / f"{kind}.safetensors"
    translator.save(path)
    loaded = load_translator(path)
    old = _old_loading(translator.config, {k: v for k, v in load_file(path).items() if not k.startswith("__")})
    _on_cpu_and_finite(loaded.model)
    new_state, old_state = loaded.model.state_dict(), old.state_dict()
    assert new_state.keys() == old_state.keys()
    assert all(torch.equal(new_state[k], old_state[k]) and new_state[k].dtype == old_state[k].dtype
               for k in new_state)
    old_translator = Translator(old, loaded.src_vocab, loaded.tgt_vocab, loaded.src_spec, loaded.tgt_spec)
    _same_outputs(loaded, old_translator, "" if kind == "char-lm" else "w1 w2 w3")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_marian_folder(tmp_path_factory.mktemp("marian") / "opus-mt-de-en")


def test_a_marian_folder_loads_the_old_loadings_weights_mapped_with_one_shared_embedding(folder):
    """The same weights, bit for bit, now views of the file (the shared table shifted, not copied); the outputs
    within float32's rounding of the copied weights' (an imported folder maps tensors wherever float32 allows)."""
    loaded = load_translator(folder)
    parts = folder_parts(folder)
    expected = stored_state(build_model(parts.cfg))
    old = _old_loading(parts.cfg, {k: v for k, v in marian_state(load_file(folder / "model.safetensors"), parts).items()
                                   if k in expected})
    _on_cpu_and_finite(loaded.model)
    assert all(torch.equal(v, old.state_dict()[k]) for k, v in loaded.model.state_dict().items())
    _same_outputs(loaded, Translator(old, loaded.src_vocab, loaded.tgt_vocab, loaded.src_spec, loaded.tgt_spec),
                  "ein hund läuft", exact=False)
    model = loaded.model
    copied = [name for name, t in stored_state(model).items() if mapping_of(t) is None]
    assert copied == ["out_proj.bias"]  # final_logits_bias's reordered copy (a row of V values); the rest are views
    shared = (model.src_embed.tokens.weight, model.tgt_embed.tokens.weight, model.out_proj.weight)
    assert shared[0] is shared[1] is shared[2]  # one parameter, as the network's constructor ties them
    assert len({t.data_ptr() for t in shared}) == 1
    assert count_parameters(model) == loaded.card.parameters == sum(t.numel() for t in stored_state(model).values())


def test_a_buffer_left_on_the_meta_device_is_refused_by_name(tmp_path, monkeypatch):
    translator = _toy("marian")  # sinusoidal positions: a table in each embedding
    from attnviz.engine.models.layers import Embedding

    monkeypatch.setattr(Embedding, "compute_buffers", lambda self: None)  # a module that forgets its table
    with pytest.raises(CheckpointError, match=r"src_embed\.table, tgt_embed\.table were not loaded or computed"):
        build_loaded(tmp_path, translator.config, stored_state(translator.model))


def test_a_state_missing_a_tensor_names_it_and_its_shape(tmp_path):
    translator = _toy("transformer")
    state = stored_state(translator.model)
    del state["out_proj.bias"]
    with pytest.raises(CheckpointError, match=r"out_proj\.bias should have shape \[\d+\] by the model's settings but "
                                              "the weights give nothing"):
        build_loaded(tmp_path, translator.config, state)


def test_mapped_weights_written_in_memory_never_reach_the_file(tmp_path):
    translator = _toy("transformer")
    path = tmp_path / "toy.safetensors"
    translator.save(path)
    before = path.read_bytes()
    loaded = load_translator(path)
    with torch.no_grad():
        loaded.model.out_proj.weight.fill_(7.0)  # a private mapping: this process's copy changes, not the file
    assert path.read_bytes() == before
    assert not torch.equal(load_translator(path).model.out_proj.weight, loaded.model.out_proj.weight)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kind", KINDS)
def test_half_precision_runs_at_that_dtype_and_returns_float32_attention(tmp_path, kind, dtype):
    translator = _toy(kind)
    path = tmp_path / f"{kind}.safetensors"
    translator.save(path, half=True)
    loaded = load_translator(path, dtype)
    assert {p.dtype for p in loaded.model.parameters()} == {getattr(torch, dtype)} and loaded.dtype == dtype
    assert all(b.dtype == getattr(torch, dtype) for b in loaded.model.buffers())
    assert loaded.card.dtype == "float16" and loaded.card.to_info()["runs_as"] == dtype
    result = loaded.translate("" if kind == "char-lm" else "w1 w2 w3", DECODE)
    assert result.attention and all(a.dtype == np.float32 and np.isfinite(a).all() for a in result.attention.values())
    assert load_translator(path).dtype == "float32"  # auto: float32 on the CPU, whatever the file stores


def test_values_beyond_half_precision_are_refused_at_that_dtype(tmp_path):
    translator = _toy("transformer")
    with torch.no_grad():
        translator.model.out_proj.bias[0] = 1e6  # finite in float32, infinite in float16
    path = tmp_path / "big.safetensors"
    translator.save(path)
    with pytest.raises(CheckpointError, match=r"out_proj\.bias holds values beyond the range of float16; load the "
                                              r"model at float32 \(--dtype float32\)"):
        load_translator(path, "float16")
    assert load_translator(path, "bfloat16").dtype == "bfloat16"  # bfloat16 has float32's range


def test_an_operation_the_cpu_cannot_run_at_half_precision_is_said_at_loading(tmp_path, monkeypatch):
    translator = _toy("transformer")
    path = tmp_path / "toy.safetensors"
    translator.save(path)

    def refuse(self, x):
        if x.dtype != torch.float32:
            raise RuntimeError("\"LayerNormKernelImpl\" not implemented for 'BFloat16'")
        return torch.nn.functional.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    monkeypatch.setattr(torch.nn.LayerNorm, "forward", refuse)
    with pytest.raises(CheckpointError, match=r"this Transformer encoder-decoder cannot run at bfloat16 on this "
                                              r"machine \(\"LayerNormKernelImpl\" not implemented for 'BFloat16'\); "
                                              r"load it at float32 \(--dtype float32\)"):
        load_translator(path, "bfloat16")
    assert load_translator(path, "float32").dtype == "float32"


def test_an_unknown_dtype_is_refused_in_one_line(tmp_path):
    translator = _toy("transformer")
    translator.save(tmp_path / "toy.safetensors")
    with pytest.raises(InputError, match="unknown dtype 'half': choose one of auto, float32, float16, bfloat16"):
        load_translator(tmp_path / "toy.safetensors", "half")


def _meminfo(tmp_path: Path, monkeypatch, kib: int) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal:       32000000 kB\nMemFree:          100000 kB\nMemAvailable:   {kib:>8} kB\n")
    monkeypatch.setattr(memory, "MEMINFO", meminfo)


def _needed(card, dtype: str) -> int:
    return memory.model_bytes(card.parameters, dtype) + memory.run_bytes(card.kind, card.config, dtype)


def test_a_model_larger_than_the_available_memory_is_refused_before_reading(folder, tmp_path, monkeypatch):
    card = read_card(folder)
    parameters, full, half = card.parameters, _needed(card, "float32"), _needed(card, "bfloat16")
    room = (full + half) // 2 // 1024  # room at half precision, not at float32
    _meminfo(tmp_path, monkeypatch, room)
    weights, decode = memory.size_text(parameters * 4), memory.size_text(full - parameters * 4)
    with pytest.raises(CheckpointError, match=rf"\({parameters:,} parameters\) needs {memory.size_text(full)} at "
                                              rf"float32 \(weights {weights}, key/value cache and attention maps of "
                                              rf"a long sentence's decode {decode}\), "
                                              rf"{memory.size_text(room * 1024)} available; try --dtype bfloat16"):
        load_translator(folder)
    assert load_translator(folder, "bfloat16").dtype == "bfloat16"
    _meminfo(tmp_path, monkeypatch, half // 2 // 1024)  # not even at half precision
    with pytest.raises(CheckpointError, match="available; close other programs, or use a machine with more memory"):
        load_translator(folder, "float16")


def test_the_cli_refuses_a_model_too_large_with_the_numbers(folder, tmp_path, monkeypatch, capsys):
    _meminfo(tmp_path, monkeypatch, 1)
    assert main(["translate", "-m", str(folder), "ein hund"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"attnviz: error: {folder}: the model (") and "decode" in err and "0.0 MiB available" in err
    assert err.count("\n") == 1


def test_info_says_parameters_memory_per_dtype_and_precision(folder, capsys):
    assert main(["info", str(folder), "--dtype", "bfloat16"]) == 0
    out = capsys.readouterr().out
    parameters = read_card(folder).parameters
    assert f"parameters {parameters:,}  (stored as float32, runs as bfloat16 with --dtype bfloat16)" in out
    assert (f"memory     {memory.size_text(4 * parameters)} at float32, {memory.size_text(2 * parameters)} at "
            f"float16, {memory.size_text(2 * parameters)} at bfloat16") in out
    assert main(["info", str(folder), "--json"]) == 0
    import json

    info = json.loads(capsys.readouterr().out)
    assert info["runs_as"] == "float32" and info["memory_bytes"] == {"float32": 4 * parameters,
                                                                     "float16": 2 * parameters,
                                                                     "bfloat16": 2 * parameters}
    card = read_card(folder)
    assert info["decode_bytes"]["bfloat16"] == memory.run_bytes(card.kind, card.config, "bfloat16") > 0


def test_a_bad_dtype_on_the_command_line_gets_argparses_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["translate", "--dtype", "half", "x"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == ("attnviz translate: error: argument --dtype: expected one of "
                                                        "auto, float32, float16, bfloat16, not 'half'")


def test_a_half_precision_folder_states_its_stored_dtype(folder, tmp_path):
    half = tmp_path / "half"
    half.mkdir()
    for f in folder.iterdir():
        (half / f.name).write_bytes(f.read_bytes())
    save_file({k: v.half() for k, v in load_file(folder / "model.safetensors").items()}, half / "model.safetensors",
              metadata={"format": "pt"})
    assert load_translator(half).card.dtype == "float16"
    assert load_translator(half, "float16").model.out_proj.weight.dtype == torch.float16


def test_gui_dtype_sets_the_apps_precision_and_none_keeps_the_remembered_one(monkeypatch):
    import attnviz.gui.app

    calls = []
    monkeypatch.setattr(attnviz.gui.app, "run_gui", lambda checkpoint=None, dtype=None: calls.append(
        (checkpoint, dtype)) or 0)
    assert main(["gui", "model.safetensors", "--dtype", "float16"]) == 0 and main(["gui"]) == 0
    assert calls == [("model.safetensors", "float16"), (None, None)]


def test_info_check_loads_at_the_dtype_asked(folder, capsys):
    assert main(["info", "--check", "--dtype", "float16", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "runs as float16 with --dtype float16" in out and "values: every weight read, all finite" in out
