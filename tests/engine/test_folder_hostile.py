"""Hostile MarianMT folders, case by case (issue 30): malformed files, size bombs refused before any tensor exists,
configs that disagree with their weights, NaN weights, a pickled ``pytorch_model.bin``, and what ``attnviz info``
and ``attnviz convert`` say about each; then hypothesis fuzzing of the folder's JSON files. Every folder is a tiny
random one written by ``tests.folder_samples`` (no download, no ``transformers``)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from attnviz.cli.main import main
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub.marian_files import FIELDS
from attnviz.engine.loading import load_translator, read_card
from tests.folder_samples import synthetic_lines, train_spm, write_marian_folder


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    return write_marian_folder(tmp_path_factory.mktemp("good") / "opus-mt-de-en")


@pytest.fixture()
def folder(good, tmp_path) -> Path:
    copy = tmp_path / "opus-mt-de-en"
    shutil.copytree(good, copy)
    return copy


def edit_json(path: Path, **changes) -> None:
    value = json.loads(path.read_text(encoding="utf-8"))
    value.update(changes)
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")


def refused(folder: Path, *words: str, file: str) -> str:
    """The one-line message loading gives; it names ``file`` and holds ``words``."""
    with pytest.raises(CheckpointError) as err:
        load_translator(folder)
    message = str(err.value)
    assert "\n" not in message and str(folder / file) in message, message
    assert all(w in message for w in words), message
    return message


NESTED = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("file", ["config.json", "vocab.json", "tokenizer_config.json"])
def test_json_nested_deeply_in_any_file_is_refused(folder, file):
    (folder / file).write_text(NESTED)
    refused(folder, "nested too deeply", file=file)
    (folder / file).write_text('{"a": ' + "[" * 40 + "]" * 40 + "}")  # within the parser's reach, beyond the schema
    refused(folder, "nested too deeply", file=file)


@pytest.mark.parametrize("raw", ["Infinity", "1e400", "NaN", "-Infinity"])
def test_a_non_finite_d_model_is_refused_naming_the_field(folder, raw):
    text = (folder / "config.json").read_text().replace('"d_model": 32', f'"d_model": {raw}')
    (folder / "config.json").write_text(text)
    refused(folder, "field 'd_model'", raw, "finite number", file="config.json")


def test_a_tokenizer_config_that_is_a_list_is_refused(folder):
    (folder / "tokenizer_config.json").write_text('["de", "en"]')
    refused(folder, "holds a list, not a JSON object", file="tokenizer_config.json")


@pytest.mark.parametrize("changes, field", [
    (dict(encoder_ffn_dim=10**9, decoder_ffn_dim=10**9), "encoder_ffn_dim"),
    (dict(max_position_embeddings=2**62), "max_position_embeddings"),
    (dict(d_model=8192 * 4), "d_model"),
    (dict(encoder_layers=10**6, decoder_layers=10**6), "encoder_layers"),
])
def test_size_bombs_are_refused_before_any_tensor_exists(folder, changes, field, monkeypatch):
    edit_json(folder / "config.json", **changes)
    from attnviz.engine import translator

    built = []
    monkeypatch.setattr(translator, "build_model", lambda cfg: built.append(cfg))
    refused(folder, f"field {field!r}", "it must be between 0 and", file="config.json")
    assert built == []  # not even a shapes-only model was built


def test_a_size_bomb_within_the_limits_is_refused_on_the_meta_device(folder, monkeypatch):
    """Positions 16,384 x d_model 8,192 pass each field's limit but would build a 134M-value table."""
    edit_json(folder / "config.json", max_position_embeddings=16384, d_model=8192, encoder_attention_heads=8,
              decoder_attention_heads=8)
    from attnviz.engine import translator

    devices = []
    real = translator.build_model
    monkeypatch.setattr(translator, "build_model", lambda cfg: devices.append(torch.empty(0).device) or real(cfg))
    with pytest.raises(CheckpointError, match="extra values in memory beyond its weights"):
        load_translator(folder)
    assert devices == [torch.device("meta")]


@pytest.mark.parametrize("changes, file, words", [
    (dict(encoder_layers=1), "model.safetensors", ("holds model.encoder.layers.1.", "does not account for")),
    (dict(encoder_layers=3, decoder_layers=3), "model.safetensors", ("lacks model.encoder.layers.2.",)),
    (dict(encoder_attention_heads=4.0, decoder_attention_heads=4.0), "config.json",
     ("field 'encoder_attention_heads' is 4.0", "whole number")),
    (dict(encoder_attention_heads="4", decoder_attention_heads="4"), "config.json", ("whole number",)),
    (dict(encoder_attention_heads=5, decoder_attention_heads=5), "config.json", ("divisible by heads (5)",)),
    (dict(decoder_attention_heads=2), "config.json", ("'decoder_attention_heads' is 2", "agree")),
    (dict(activation_function="relu6"), "config.json", ("activation must be one of",)),
    (dict(activation_function=5), "config.json", ("field 'activation_function' is 5", "string")),
    (dict(eos_token_id=-1), "config.json", ("field 'eos_token_id' is -1", "token id from 0 to")),
    (dict(pad_token_id=10**6, decoder_start_token_id=10**6), "config.json", ("field 'pad_token_id'",)),
    (dict(eos_token_id=2.0), "config.json", ("field 'eos_token_id' is 2.0",)),
    (dict(vocab_size=10), "config.json", ("field 'vocab_size' is 10", "vocab.json holds")),
    (dict(scale_embedding="yes"), "config.json", ("field 'scale_embedding' is 'yes'", "does not support")),
    (dict(tie_word_embeddings=False), "model.safetensors", ("lacks lm_head.weight",)),
])
def test_a_config_that_disagrees_with_its_weights_is_refused(folder, changes, file, words):
    edit_json(folder / "config.json", **changes)
    refused(folder, *words, file=file)


def test_a_vocab_shorter_than_the_embedding_is_refused(folder):
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    pad = vocab.pop("<pad>")
    last = max(vocab, key=vocab.get)
    del vocab[last]
    vocab["<pad>"] = pad - 1
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    config = json.loads((folder / "config.json").read_text())
    edit_json(folder / "config.json", pad_token_id=pad - 1, decoder_start_token_id=pad - 1)
    edit_json(folder / "generation_config.json", pad_token_id=pad - 1, decoder_start_token_id=pad - 1,
              bad_words_ids=[[pad - 1]])
    refused(folder, "'vocab_size'", f"vocab.json holds {len(vocab):,} pieces", file="config.json")
    config = {k: v for k, v in json.loads((folder / "config.json").read_text()).items()
              if k not in ("vocab_size", "decoder_vocab_size")}
    (folder / "config.json").write_text(json.dumps(config))
    refused(folder, "has shape [", f"{pad + 1}], but config.json implies [", f"{pad}]", file="model.safetensors")


def test_a_one_piece_or_foreign_or_broken_sentencepiece_model_is_refused(folder):
    (folder / "target.spm").write_bytes(train_spm(["a"] * 20, 4))
    refused(folder, "holds only", "piece(s)", file="target.spm")
    (folder / "target.spm").write_bytes(train_spm([line.upper() for line in synthetic_lines(7)], 60))
    refused(folder, "pieces are in the model's vocabulary", file="target.spm")
    (folder / "target.spm").write_bytes(b"\x0a\x03not a model")
    refused(folder, "is not a SentencePiece model", file="target.spm")


def test_nan_weights_are_refused_naming_the_file_and_tensor(folder):
    tensors = load_file(folder / "model.safetensors")
    tensors["model.decoder.layers.1.fc2.weight"][3, 4] = float("inf")
    save_file(tensors, folder / "model.safetensors")
    refused(folder, "tensor model.decoder.layers.1.fc2.weight holds 1 NaN or infinite", file="model.safetensors")


class Payload:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_a_pickled_bin_is_refused_without_advising_to_unpickle(folder, capsys):
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save({**tensors, "extra": Payload()}, folder / "pytorch_model.bin")
    message = refused(folder, "holds Python objects besides tensors", "attnviz refuses it",
                      "Convert it to model.safetensors with a tool you trust", file="pytorch_model.bin")
    assert "weights_only" not in message and "this must never run" not in capsys.readouterr().out
    assert main(["convert", str(folder), "--out", str(folder / "x.safetensors")]) == 1
    err = capsys.readouterr().err
    assert "weights_only" not in err and "refuses it" in err and not (folder / "x.safetensors").exists()


def test_a_plain_bin_still_loads_and_its_disagreements_are_caught(folder, capsys):
    tensors = load_file(folder / "model.safetensors")
    expected = load_translator(folder).translate("ein hund spielt im schnee").tokens
    (folder / "model.safetensors").unlink()
    torch.save(tensors, folder / "pytorch_model.bin")
    assert load_translator(folder).translate("ein hund spielt im schnee").tokens == expected
    assert main(["info", str(folder)]) == 0
    assert ("note       pytorch_model.bin: tensor names and shapes are checked only when it is loaded (--check)"
            in capsys.readouterr().out)
    edit_json(folder / "config.json", encoder_layers=1)
    refused(folder, "holds model.encoder.layers.1.", file="pytorch_model.bin")


def test_convert_refuses_what_translate_refuses_and_writes_nothing(folder, tmp_path, capsys):
    out = tmp_path / "out.safetensors"
    (folder / "source.spm").write_bytes(b"broken")
    assert main(["translate", "-m", str(folder), "hallo"]) == 1
    assert main(["convert", str(folder), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("source.spm is not a SentencePiece model" in line for line in err)
    assert not out.exists()


def test_info_checks_the_index_fast_and_values_with_check(folder, capsys):
    assert main(["info", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "checked    model.safetensors: 86 tensors" in out and "not checked: values" in out
    tensors = load_file(folder / "model.safetensors")
    tensors["final_logits_bias"][0, 0] = float("nan")
    save_file(tensors, folder / "model.safetensors")
    assert main(["info", str(folder)]) == 0 and "not checked: values" in capsys.readouterr().out
    assert main(["info", "--check", str(folder)]) == 1
    assert "final_logits_bias holds 1 NaN" in capsys.readouterr().err


def test_info_notes_tensors_that_are_there_but_not_read(folder, capsys):
    tensors = load_file(folder / "model.safetensors")
    tensors["model.encoder.embed_positions.weight"] = torch.zeros(64, 32)
    save_file(tensors, folder / "model.safetensors")
    assert main(["info", "--json", str(folder)]) == 0
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert checks["notes"] == ["model.encoder.embed_positions.weight is not read: positions are computed (the same "
                               "sinusoids), not read"]
    assert checks["not_checked"][:2] == ["values (run with --check to read every weight)",
                                         "the model's size in memory (--check builds it)"]
    assert [n.split(" (")[0] for n in checks["not_checked"][2:]] == ["the number of attention heads",
                                                                      "the activation", "the embedding scale"]


def test_info_refuses_a_checkpoint_file_missing_a_tensor(tmp_path, trained_translator, capsys):
    from attnviz.engine.checkpoints import store

    path = tmp_path / "m.safetensors"
    trained_translator.save(path)
    assert main(["info", str(path)]) == 0 and "not checked: values" in capsys.readouterr().out
    meta, tensors = store.load_tensors(path)
    missing = sorted(k for k in tensors if not k.startswith("tokenizer."))[0]
    del tensors[missing]
    store.save_tensors(path, tensors, {k: v for k, v in meta.items() if k not in ("format", "dtype")})
    assert main(["info", str(path)]) == 1
    assert f"missing: ['{missing}']" in capsys.readouterr().err


# -- fuzzing ------------------------------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_folder_configs_give_a_checkpoint_error_or_the_model_they_describe(good, tmp_path, data):
    folder = Path(tempfile.mkdtemp(dir=tmp_path)) / "opus-mt-de-en"
    shutil.copytree(good, folder)
    file = data.draw(st.sampled_from(["config.json", "config.json", "tokenizer_config.json", "vocab.json"]))
    value = json.loads((folder / file).read_text(encoding="utf-8"))
    key = data.draw(st.sampled_from(sorted(value) + ["separate_vocabs", "source_lang"]))
    if data.draw(st.booleans()) and key in value:
        del value[key]
    else:
        value[key] = data.draw(JSON_VALUES)
    (folder / file).write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    try:
        translator = load_translator(folder)
    except CheckpointError as exc:
        assert "\n" not in str(exc) and str(folder) in str(exc)
        return
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    for name, own in FIELDS.items():  # what loads is what config.json says, never a coerced value
        if own in config and name != "share_embeddings" and not (name == "activation" and config[own] == "silu"):
            assert getattr(translator.config, name) == config[own] and type(getattr(translator.config, name)) is type(
                config[own]), (own, config[own])
    assert read_card(folder).config == translator.config
