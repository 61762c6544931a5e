"""Hostile checkpoints: every malformed header, size bomb, broken weight and special file gives one CheckpointError
naming the problem, never another exception, a hang or an allocation the file does not justify."""

import json
import os
import struct
import threading

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnviz import load_translator
from attnviz.engine.checkpoints import store as checkpoint
from attnviz.engine.checkpoints.header import read_header
from attnviz.engine.errors import CheckpointError


@pytest.fixture(scope="module")
def good_bytes(tmp_path_factory, trained_translator):
    path = tmp_path_factory.mktemp("hdr") / "good.safetensors"
    trained_translator.save(path, name="toy", metrics={"val": {"loss": 1.5}})
    return path.read_bytes()


def split(data: bytes) -> tuple[dict, bytes]:
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + n]), data[8 + n:]


def join(header: dict, body: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + body


def with_meta(good: bytes, change) -> bytes:
    header, body = split(good)
    meta = json.loads(header["__metadata__"]["attnviz"])
    change(meta)
    header["__metadata__"]["attnviz"] = json.dumps(meta)
    return join(header, body)


def with_header(good: bytes, change) -> bytes:
    header, body = split(good)
    change(header)
    return join(header, body)


def nested(n: int) -> str:
    return "[" * n + "]" * n


def set_entry(key, value):
    return lambda h: h.update({key: value})


HEADER_CASES = {  # case -> (change of the raw header, words the message must contain)
    "deep JSON header": (lambda g: g[:8 - 8] + struct.pack("<Q", 200_002) + b'{"a":' + nested(100_000).encode()
                         + b"}", "nested too deeply"),
    "deep metadata": (lambda g: with_meta(g, lambda m: m.update(name=json.loads(nested(30)) and "x",
                                                                 recipe={"x": json.loads(nested(40))})),
                      "nested more than"),
    "metadata not a map": (lambda g: with_header(g, set_entry("__metadata__", [1, 2])), "not a map of strings"),
    "metadata a list": (lambda g: with_header(g, lambda h: h["__metadata__"].update(attnviz="[1]")), "not an object"),
    "tensor entry a string": (lambda g: with_header(g, set_entry("x", "hello")), "not an object"),
    "offsets wrong type": (lambda g: with_header(g, set_entry("x", {"dtype": "F32", "shape": [1],
                                                                    "data_offsets": ["0", "4"]})), "data_offsets"),
    "unknown dtype": (lambda g: with_header(g, set_entry("x", {"dtype": "Q7", "shape": [1],
                                                               "data_offsets": [0, 4]})), "dtype"),
    "shape not ints": (lambda g: with_header(g, set_entry("x", {"dtype": "F32", "shape": [1.5],
                                                                "data_offsets": [0, 4]})), "shape"),
    "shape disagrees with bytes": (lambda g: with_header(g, set_entry("x", {"dtype": "F32", "shape": [9],
                                                                            "data_offsets": [0, 4]})), "does not fit"),
    "d_model Infinity": (lambda g: with_meta(g, lambda m: m["model"].update(d_model=float("inf"))), "whole number"),
    "enc_layers 2.5": (lambda g: with_meta(g, lambda m: m["model"].update(enc_layers=2.5)), "whole number"),
    "dropout NaN": (lambda g: with_meta(g, lambda m: m["model"].update(dropout=float("nan"))), "finite number"),
    "kind not a string": (lambda g: with_meta(g, lambda m: m["model"].update(kind=3)), "must be a string"),
    "metrics a list": (lambda g: with_meta(g, lambda m: m.update(metrics=[1])), "'metrics' entry is a list"),
    "metrics of numbers": (lambda g: with_meta(g, lambda m: m.update(metrics={"val": 3})), "each split"),
    "a figure that is a string": (lambda g: with_meta(g, lambda m: m.update(metrics={"test": {"bleu_tok": "x"}})),
                                  "'bleu_tok' = 'x', which is not a number"),
    "tokenizer of lists": (lambda g: with_meta(g, lambda m: m["src_tokenizer"].update(lang=["de"])),
                           "src_tokenizer settings must be plain values"),
    "vocab of numbers": (lambda g: with_meta(g, lambda m: m.update(src_vocab=[1, 2])), "not strings"),
    "model a string": (lambda g: with_meta(g, lambda m: m.update(model="big")), "'model' entry is a string"),
    "history a dict": (lambda g: with_meta(g, lambda m: m.update(history={})), "'history' entry is an object"),
    "enc_layers 100000": (lambda g: with_meta(g, lambda m: m["model"].update(enc_layers=100000)), "between 0 and 64"),
    "max_positions 1e9": (lambda g: with_meta(g, lambda m: m["model"].update(max_positions=1e9)), "whole number"),
    "max_positions 10**9": (lambda g: with_meta(g, lambda m: m["model"].update(max_positions=10**9)), "16,384"),
    "overlapping offsets": (lambda g: with_header(g, share_bytes), "overlap"),
}


def share_bytes(header: dict) -> None:
    """Point the second of two same-sized tensors at the first one's bytes."""
    seen: dict[tuple, str] = {}
    for name, entry in header.items():
        if name != "__metadata__":
            key = (entry["dtype"], tuple(entry["shape"]))
            if key in seen:
                entry["data_offsets"] = list(header[seen[key]]["data_offsets"])
                return
            seen[key] = name


@pytest.mark.parametrize("case", list(HEADER_CASES))
def test_every_malformed_header_gives_one_clear_message(tmp_path, good_bytes, case):
    change, words = HEADER_CASES[case]
    path = tmp_path / "bad.safetensors"
    path.write_bytes(change(good_bytes))
    with pytest.raises(CheckpointError, match=words) as info:
        load_translator(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_size_bomb_within_the_limits_is_refused_before_allocating(tmp_path, good_bytes, monkeypatch):
    path = tmp_path / "bomb.safetensors"
    path.write_bytes(with_meta(good_bytes, lambda m: m["model"].update(enc_layers=60, d_model=8192, heads=8,
                                                                        ff_dim=65536)))
    from attnviz.engine import translator

    built = []
    real = translator.build_model
    monkeypatch.setattr(translator, "build_model", lambda cfg: built.append(torch.empty(0).device) or real(cfg))
    with pytest.raises(CheckpointError, match=r"needs [\d,]+ weights, the file holds [\d,]+"):
        load_translator(path)
    assert built == [torch.device("meta")]  # the only model ever built was shapes without memory


def test_nan_and_inf_weights_are_refused_naming_the_tensor(tmp_path, trained_translator):
    path = tmp_path / "nan.safetensors"
    trained_translator.save(path)
    meta, tensors = checkpoint.load_tensors(path)
    tensors["decoder.0.ff.1.weight" if "decoder.0.ff.1.weight" in tensors else sorted(tensors)[3]][0, 0] = float("inf")
    name = next(k for k, v in tensors.items() if not torch.isfinite(v).all())
    checkpoint.save_tensors(path, tensors, {k: v for k, v in meta.items() if k not in ("format", "dtype")})
    with pytest.raises(CheckpointError, match=f"tensor {name} holds 1 NaN or infinite"):
        load_translator(path)


def test_a_named_pipe_is_refused_at_once_instead_of_blocking(tmp_path):
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    outcome = []

    def load():
        try:
            load_translator(fifo)
        except CheckpointError as exc:
            outcome.append(str(exc))

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(20)
    if thread.is_alive():  # unblock the reader so the test process can end, then fail
        with open(fifo, "wb"):
            pass
        pytest.fail("loading a named pipe blocked")
    assert outcome and "is a named pipe" in outcome[0]


def test_a_device_and_an_unreadable_file_are_refused(tmp_path, good_bytes, monkeypatch):
    with pytest.raises(CheckpointError, match="is a device"):
        read_header("/dev/zero")
    path = tmp_path / "locked.safetensors"
    path.write_bytes(good_bytes)
    real_open = os.open

    def denied(name, *args, **kwargs):  # tests may run as root, whom chmod 0 does not stop
        if str(name) == str(path):
            raise PermissionError(13, "Permission denied", str(name))
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(CheckpointError, match="cannot be read \\(Permission denied\\)"):
        load_translator(path)


def mutate(good: bytes, data) -> bytes:
    """Random damage in the places a loader trusts: the length prefix, header bytes, header values."""
    choice = data.draw(st.integers(0, 3))
    if choice == 0:
        return data.draw(st.binary(max_size=200))
    if choice == 1:
        n = data.draw(st.integers(0, 1 << 64 - 1))
        return struct.pack("<Q", n) + good[8:]
    if choice == 2:
        pos = data.draw(st.integers(0, len(good) - 1))
        return good[:pos] + data.draw(st.binary(min_size=1, max_size=8)) + good[pos + 1:]
    json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                               lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                           max_size=3), max_leaves=8)
    key = data.draw(st.sampled_from(["model", "src_vocab", "metrics", "history", "name", "src_tokenizer", "format",
                                     "format_version", "d_model", "enc_layers", "max_positions", "kind", "heads"]))
    value = data.draw(json_values)
    if key in ("d_model", "enc_layers", "max_positions", "kind", "heads"):
        return with_meta(good, lambda m: m["model"].update({key: value}))
    return with_meta(good, lambda m: m.update({key: value}))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_headers_give_a_checkpoint_error_or_a_model(tmp_path, good_bytes, data):
    path = tmp_path / "fuzz.safetensors"
    path.write_bytes(mutate(good_bytes, data))
    try:
        translator = load_translator(path)
    except CheckpointError as exc:
        assert str(exc)
    else:
        assert translator.model is not None
