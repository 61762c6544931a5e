import json
import os
import pickle

import numpy as np
import pytest
import torch

from attnviz import load_translator
from attnviz.engine.checkpoints import store as checkpoint
from attnviz.engine.errors import CheckpointError
from tests.helpers import make_toy_translator


@pytest.fixture()
def saved(tmp_path, trained_translator):
    path = tmp_path / "toy.safetensors"
    trained_translator.save(path, name="toy", metrics={"val": {"loss": 1.5}})
    return path


def test_round_trip_is_bit_exact(saved, trained_translator):
    loaded = load_translator(saved)
    original = trained_translator.model.state_dict()
    for name, tensor in loaded.model.state_dict().items():
        assert torch.equal(tensor, original[name]), name
    assert loaded.src_vocab == trained_translator.src_vocab and loaded.tgt_spec == trained_translator.tgt_spec
    assert loaded.translate("q1 q2 q3").tokens == trained_translator.translate("q1 q2 q3").tokens
    assert loaded.info["metrics"] == {"val": {"loss": 1.5}} and loaded.info["name"] == "toy"
    assert loaded.info["parameters"] == sum(p.numel() for p in trained_translator.model.parameters())


def test_half_precision_storage_loads_as_float32(tmp_path, trained_translator):
    path = tmp_path / "half.safetensors"
    trained_translator.save(path, half=True)
    loaded = load_translator(path)
    assert loaded.info["dtype"] == "float16"
    assert all(p.dtype == torch.float32 for p in loaded.model.parameters())
    assert loaded.translate("q1 q2 q3").tokens == trained_translator.translate("q1 q2 q3").tokens


def test_tied_weights_round_trip(tmp_path):
    tr = make_toy_translator(seed=4, tie_output=True, norm="pre", positions="sinusoidal")
    tr.save(tmp_path / "tied.safetensors")
    loaded = load_translator(tmp_path / "tied.safetensors")
    assert loaded.model.out_proj.weight is loaded.model.tgt_embed.tokens.weight
    assert torch.equal(loaded.model.out_proj.weight, tr.model.out_proj.weight)


def test_a_pickle_is_refused_without_running_its_code(tmp_path):
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    for name, write in [("evil.pt", lambda p: torch.save({"x": Exploit()}, p)),
                        ("evil.pkl", lambda p: p.write_bytes(pickle.dumps(Exploit())))]:
        path = tmp_path / name
        write(path)
        with pytest.raises(CheckpointError, match="never unpickles"):
            load_translator(path)
    assert not marker.exists()


def test_a_truncated_file_gives_the_specific_error(saved):
    data = saved.read_bytes()
    saved.write_bytes(data[: len(data) - 100])
    with pytest.raises(CheckpointError, match=r"truncated: it should be \d+ bytes"):
        load_translator(saved)
    saved.write_bytes(data[:50])
    with pytest.raises(CheckpointError, match="truncated: the file ends inside its header"):
        load_translator(saved)


@pytest.mark.parametrize("content,message", [
    (b"hello world, this is text", "not a safetensors file"),
    (b"\x05", "only 1 bytes"),
    (len(b"[1,2]").to_bytes(8, "little") + b"[1,2]", "not a safetensors file"),
    (len(b"{oops").to_bytes(8, "little") + b"{oops", "header is not valid JSON"),
])
def test_foreign_files_are_named_as_such(tmp_path, content, message):
    path = tmp_path / "x.safetensors"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=message) as err:
        load_translator(path)
    assert str(path) in str(err.value)


def test_a_header_length_that_starts_like_a_pickle_is_still_read(tmp_path, trained_translator):
    path = tmp_path / "m.safetensors"
    pad = 0
    for _ in range(10):  # grow the metadata until the header length's first byte is 0x80
        trained_translator.save(path, note="x" * pad)
        first = path.read_bytes()[0]
        if first == 0x80:
            break
        pad += (0x80 - first) % 256 or 8
    assert path.read_bytes()[0] == 0x80
    assert load_translator(path).info["parameters"] > 0


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(CheckpointError, match="no such file"):
        load_translator(tmp_path / "nope.safetensors")
    with pytest.raises(CheckpointError, match="is a folder"):
        load_translator(tmp_path)


def rewrite_meta(path, change):
    meta, tensors = checkpoint.load_tensors(path)
    change(meta)
    checkpoint.save_tensors(path, tensors, {k: v for k, v in meta.items() if k not in ("format", "dtype")})
    return path


def test_unsupported_format_version(saved):
    rewrite_meta(saved, lambda m: m.update(format_version=99))
    with pytest.raises(CheckpointError, match="format version 99"):
        load_translator(saved)


def test_missing_vocabulary(saved):
    rewrite_meta(saved, lambda m: m.pop("tgt_vocab"))
    with pytest.raises(CheckpointError, match="no tgt_vocab"):
        load_translator(saved)


def test_shapes_that_do_not_match_the_config(saved):
    rewrite_meta(saved, lambda m: m["model"].update(ff_dim=128))
    with pytest.raises(CheckpointError, match=r"shape \[64, 32\] but the config needs \[128, 32\]"):
        load_translator(saved)


def test_safetensors_without_attnviz_metadata(tmp_path):
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2)}, tmp_path / "plain.safetensors")
    with pytest.raises(CheckpointError, match="not an attnviz checkpoint"):
        load_translator(tmp_path / "plain.safetensors")


def test_a_crash_mid_save_leaves_the_old_file(saved, trained_translator, monkeypatch):
    before = saved.read_bytes()

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        make_toy_translator(seed=9).save(saved)
    monkeypatch.undo()
    assert saved.read_bytes() == before
    assert sorted(p.name for p in saved.parent.iterdir()) == [saved.name]
    assert load_translator(saved).translate("q1").tokens == trained_translator.translate("q1").tokens


def test_metadata_is_plain_json_in_the_header(saved):
    meta, index = checkpoint.read_header(saved)
    assert meta["format_version"] == checkpoint.FORMAT_VERSION and "time" in meta["created"]
    assert meta["src_vocab"][:4] == ["<unk>", "<pad>", "<sos>", "<eos>"]
    assert json.loads(json.dumps(meta)) == meta
    assert "encoder.0.self_attn.q_proj.weight" in index
    assert np.prod(index["out_proj.weight"]["shape"]) == 16 * 32


def test_loading_never_imports_torchs_compiler(tmp_path, trained_translator):
    """The shapes-only model of the size check skips weight init: on the meta device init runs torch's compiler
    stack (torch._dynamo, sympy), seconds of imports that the standalone app leaves out."""
    import subprocess
    import sys

    path = tmp_path / "m.safetensors"
    trained_translator.save(path)
    code = ("import sys; from attnviz.engine.loading import load_translator; "
            f"load_translator({str(path)!r}); print(sorted({{'sympy', 'torch._dynamo'}} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
