"""LLM folder fields that used to read as something else without a word (issue 49) are refused in one line that
names the file and the field: a template list without a "default", RoPE settings that are not an object, a
do_sample that is not a boolean."""

from __future__ import annotations

import json
import shutil

import pytest

from attnviz.cli.main import main
from attnviz.engine.errors import CheckpointError
from attnviz.engine.loading import inspect_model, load_translator

pytest.importorskip("transformers")
from tests.llm_folder import make_llm_folder  # noqa: E402  (needs transformers)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return make_llm_folder(tmp_path_factory.mktemp("fields"), "qwen2")


def _edit(folder, name: str, **fields):
    data = json.loads((folder / name).read_text())
    data.update(fields)
    (folder / name).write_text(json.dumps(data))


@pytest.mark.parametrize("name, fields, said", [
    ("tokenizer_config.json", {"chat_template": [{"name": "tool_use", "template": "{{ 1 }}"}]},
     "none named \"default\""),
    ("config.json", {"rope_parameters": "big"}, "field 'rope_parameters' is 'big'"),
    ("config.json", {"rope_scaling": [1, 2]}, "field 'rope_scaling' is [1, 2]"),
    ("generation_config.json", {"do_sample": "yes"}, "field 'do_sample' is 'yes'"),
])
def test_a_misleading_field_is_refused_in_one_line(clean, tmp_path, capsys, name, fields, said):
    folder = tmp_path / "model"
    shutil.copytree(clean, folder)
    _edit(folder, name, **fields)
    for read in (inspect_model, load_translator):
        with pytest.raises(CheckpointError) as err:
            read(folder)
        assert said in str(err.value) and name in str(err.value) and "\n" not in str(err.value)
    assert main(["info", str(folder)]) == 1
    assert said in capsys.readouterr().err


def test_the_same_tensor_in_two_shards_is_refused(tmp_path, capsys):
    from safetensors.numpy import load_file, save_file

    folder = make_llm_folder(tmp_path, "qwen2", shards=True)
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    shards = sorted(set(index.values()))
    name = next(n for n, f in index.items() if f == shards[1])  # a tensor the index puts in the second shard
    first = load_file(folder / shards[0])
    first[name] = load_file(folder / shards[1])[name] * 2  # a different copy of it in the first
    save_file(first, folder / shards[0])
    for read in (inspect_model, load_translator):
        with pytest.raises(CheckpointError, match=f"{shards[0]} holds {name}, which the folder's index puts in "
                                                  "another shard: the same tensor is in two shards"):
            read(folder)
    assert main(["info", str(folder)]) == 1 and "in two shards" in capsys.readouterr().err


def test_a_tokenizer_whose_tokens_share_an_id_is_refused(clean, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(clean, folder)
    data = json.loads((folder / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    first, second = list(vocab)[40:42]
    vocab[second] = vocab[first]
    (folder / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match=rf"tokenizer.json: tokens .* share the id {vocab[first]}"):
        load_translator(folder)
