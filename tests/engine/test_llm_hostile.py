"""Hostile LLM folders refused through the shared folder validation: one clear line each, nothing executed."""

from __future__ import annotations

import json

import pytest

from attnviz.engine.errors import CheckpointError, InputError
from attnviz.engine.loading import inspect_model, load_translator
from tests.llm_folder import make_llm_folder

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return make_llm_folder(tmp_path_factory.mktemp("llm"), "qwen2")


@pytest.fixture
def folder(base, tmp_path):
    import shutil

    return shutil.copytree(base, tmp_path / "copy")


def edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def refused(folder, match, error=CheckpointError):
    with pytest.raises(error, match=match) as caught:
        load_translator(folder, "float32")
    assert "\n" not in str(caught.value) and "Traceback" not in str(caught.value)


def test_a_tokenizer_that_is_not_bpe_or_unigram(folder):
    edit_json(folder / "tokenizer.json", lambda d: d["model"].update(type="WordPiece"))
    refused(folder, "its model is 'WordPiece', but attnviz reads BPE and Unigram tokenizers")


def test_deep_and_huge_json(folder):
    (folder / "tokenizer.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(folder, "tokenizer.json")
    (folder / "config.json").write_text('{"model_type": "qwen2", "x": ' + "[" * 5000 + "]" * 5000 + "}")
    refused(folder, "config.json")


def test_a_template_that_loops_for_ever_is_stopped(folder):
    loop = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
    edit_json(folder / "tokenizer_config.json", lambda d: d.update(chat_template=loop))
    translator = load_translator(folder, "float32")
    with pytest.raises(InputError, match="ran past its budget of steps"):
        translator.translate("Ein Hund.")


def test_a_template_that_raises_or_reaches_for_python(folder):
    edit_json(folder / "tokenizer_config.json",
              lambda d: d.update(chat_template="{{ raise_exception('no system role') }}"))
    with pytest.raises(InputError, match="refused the prompt: no system role"):
        load_translator(folder, "float32").translate("Ein Hund.")
    escape = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    edit_json(folder / "tokenizer_config.json", lambda d: d.update(chat_template=escape))
    with pytest.raises(InputError, match="chat template failed"):
        load_translator(folder, "float32").translate("Ein Hund.")
    edit_json(folder / "tokenizer_config.json", lambda d: d.update(chat_template="{% for %}"))
    refused(folder, "is not a valid template")


def test_ids_out_of_range(folder):
    edit_json(folder / "generation_config.json", lambda d: d.update(eos_token_id=[10**6]))
    refused(folder, "must be a token id from 0 to")
    edit_json(folder / "generation_config.json", lambda d: d.update(eos_token_id=[2]))
    edit_json(folder / "config.json", lambda d: d.update(vocab_size=100))
    refused(folder, "has token id .* but the model's embedding has 100 rows")


def test_a_missing_shard(tmp_path):
    folder = make_llm_folder(tmp_path, "qwen2", shards=True)
    shard = sorted(folder.glob("model-*.safetensors"))[-1]
    shard.unlink()
    refused(folder, f"lacks the shard {shard.name}")


def test_head_dim_that_disagrees_with_the_weights(folder):
    edit_json(folder / "config.json", lambda d: d.update(head_dim=16))
    with pytest.raises(CheckpointError, match="has shape .* but config.json implies"):
        inspect_model(folder)


def test_an_unknown_rope_scaling_and_other_families(folder):
    edit_json(folder / "config.json", lambda d: d.update(rope_parameters={"rope_type": "yarn", "factor": 4.0,
                                                                          "rope_theta": 10000.0}))
    refused(folder, "rope scaling type 'yarn' is not one attnviz computes")
    for model_type, named in (("phi3", "Phi-3 \\(fused qkv"), ("cohere", "Cohere"), ("gemma3", "Gemma 3 multimodal")):
        edit_json(folder / "config.json", lambda d, m=model_type: d.update(model_type=m))
        refused(folder, f"holds a {named}")


def test_a_bad_prompt_is_refused(base):
    translator = load_translator(base, "float32")
    for prompt, message in (("no text here", "exactly once"), ("{text} {lang}", "may use {text}"),
                            ("{text", "not a valid template")):
        with pytest.raises(InputError, match=message):
            translator.set_prompt(prompt)
    translator.set_prompt("{src_lang}: {text}\n{tgt_lang}:")
    assert translator.prompt("Ein Hund.").text == "<|im_start|>user\nGerman: Ein Hund.\nEnglish:<|im_end|>\n" \
                                                  "<|im_start|>assistant\n"


def test_convert_writes_one_checkpoint_that_translates_as_the_folder(base, tmp_path, capsys):
    from attnviz.cli.main import main
    from attnviz.engine.config import DecodeConfig
    from attnviz.engine.loading import read_card

    out = tmp_path / "qwen.safetensors"
    assert main(["convert", str(base), "--out", str(out)]) == 0
    folder, converted = load_translator(base, "float32"), load_translator(out, "float32")
    decode = DecodeConfig(max_len=6)
    assert converted.translate("Ein Hund läuft.", decode).tokens == folder.translate("Ein Hund läuft.", decode).tokens
    assert converted.prompt("Ein Hund.").text == folder.prompt("Ein Hund.").text  # the template travelled
    assert read_card(out).kind.name == "llm" and read_card(out).parameters == folder.card.parameters


def test_a_converted_llm_without_its_tokenizer_is_refused(base, tmp_path):
    from safetensors.torch import load_file, save_file

    from attnviz.engine.checkpoints.header import read_header

    out = tmp_path / "qwen.safetensors"
    load_translator(base, "float32").save(out)
    meta, _ = read_header(out)
    tensors = {k: v for k, v in load_file(str(out)).items() if k != "tokenizer.json"}
    import json as _json

    save_file(tensors, str(out), metadata={"attnviz": _json.dumps(meta)})
    refused(out, "an LLM checkpoint without its tokenizer")


def test_a_bf16_folder_runs_in_bf16_unless_float32_is_asked(tmp_path):
    from attnviz.engine.config import DecodeConfig

    folder = make_llm_folder(tmp_path, "llama", dtype="bfloat16")
    assert inspect_model(folder).card.dtype == "bfloat16"
    kept, widened = load_translator(folder), load_translator(folder, "float32")
    assert (kept.dtype, widened.dtype) == ("bfloat16", "float32")
    assert kept.translate("Ein Hund.", DecodeConfig(max_len=3)).tokens  # bf16 runs on the CPU


def test_an_activation_the_family_never_uses_is_refused_and_the_rest_is_said(folder):
    info = inspect_model(folder)
    assert any("number of attention heads" in line for line in info.not_checked)
    assert any("RoPE (base" in line for line in info.not_checked)
    edit_json(folder / "config.json", lambda d: d.update(hidden_act="gelu_pytorch_tanh"))
    refused(folder, "Llama-like models gate with SiLU")
