"""Imported folder formats are plug-ins: a throwaway format defined in this file alone (a folder with a small JSON
config and a safetensors file) is described, loaded, translated, shown by ``attnviz info``, translated by ``attnviz
translate`` and converted by ``attnviz convert``; a folder no format reads gets a message naming the formats."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from attnviz.cli.main import main
from attnviz.engine.checkpoints.assign import build_loaded
from attnviz.engine.checkpoints.card import card_from_metadata, stored_parameters
from attnviz.engine.checkpoints.folder import WeightPlan
from attnviz.engine.checkpoints.header import read_index
from attnviz.engine.config import DecodeConfig, ModelConfig
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub import FolderFormat, FolderPlan, all_formats, find_format, folder_formats, format_of, registered
from attnviz.engine.hub.checkpoint import CHECKPOINT
from attnviz.engine.kinds import check, get_kind
from attnviz.engine.loading import inspect_model, load_translator, read_card
from attnviz.engine.models.protocol import count_parameters, stored_state
from attnviz.engine.text.tokenize import TokenizerSpec
from attnviz.engine.text.vocab import Vocab
from attnviz.engine.translator import Translator
from tests.helpers import make_toy_translator

TEXT = "q1 q2 q3 q4"
DECODE = DecodeConfig(max_len=6)

# -- a throwaway format, defined here and nowhere else ----------------------------------------------------------


def write_toy_folder(folder: Path, translator: Translator) -> None:
    """``toy.json`` (the model's settings, vocabularies and tokenizers) beside ``weights.safetensors``."""
    folder.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in stored_state(translator.model).items()}, folder / "weights.safetensors")
    (folder / "toy.json").write_text(json.dumps({
        "model": translator.config.to_dict(), "src_vocab": translator.src_vocab.to_list(),
        "tgt_vocab": translator.tgt_vocab.to_list(), "src_tokenizer": translator.src_spec.to_dict(),
        "tgt_tokenizer": translator.tgt_spec.to_dict()}))


def _meta(folder: Path) -> dict:
    return json.loads((folder / "toy.json").read_text()) | {"name": folder.name}


def _inspect(folder: Path) -> FolderPlan:
    """The card, and a plan trusting the weights file's own index (a test format: the shared checks still read the
    file's framing and offsets, and the loader still checks the loaded values)."""
    _, index = read_index(folder / "weights.safetensors")
    card = card_from_metadata(_meta(folder), stored_parameters(index), str(folder))
    return FolderPlan(card, WeightPlan(folder / "weights.safetensors", {k: v["shape"] for k, v in index.items()}))


def _load(folder: Path, dtype: str) -> Translator:
    meta = _meta(folder)
    model = build_loaded(folder, check(ModelConfig.from_dict(meta["model"])), load_file(folder / "weights.safetensors"),
                         dtype)
    return Translator(model, Vocab.from_list(meta["src_vocab"]), Vocab.from_list(meta["tgt_vocab"]),
                      TokenizerSpec.from_dict(meta["src_tokenizer"]), TokenizerSpec.from_dict(meta["tgt_tokenizer"]),
                      {"name": folder.name, "path": str(folder)})


TOY = FolderFormat(name="toy-json", title="toy JSON folder (a test format)",
                   recognises=lambda folder: (folder / "toy.json").is_file(), inspect=_inspect, load=_load)


@pytest.fixture()
def toy(tmp_path):
    translator = make_toy_translator(seed=5)
    folder = tmp_path / "toy-model"
    write_toy_folder(folder, translator)
    return folder, translator


def test_a_format_defined_in_one_file_is_described_loaded_and_translated(toy):
    folder, translator = toy
    expected = translator.translate(TEXT, DECODE)
    with registered(TOY):
        assert TOY in all_formats() and find_format(folder) is TOY
        card = read_card(folder)
        assert card.name == "toy-model" and card.kind is get_kind("transformer") and card.path == str(folder)
        assert card.parameters == count_parameters(translator.model) and card.languages == translator.card.languages
        loaded = load_translator(folder)
        assert loaded.config == translator.config
        assert loaded.translate(TEXT, DECODE).tokens == expected.tokens and expected.tokens
    assert TOY not in all_formats() and find_format(folder) is None
    with pytest.raises(CheckpointError, match="is a folder"):
        load_translator(folder)


def test_the_cli_shows_translates_and_converts_a_folder_of_the_format(toy, tmp_path, capsys):
    folder, translator = toy
    expected = translator.translate(TEXT, DECODE)
    out = tmp_path / "converted.safetensors"
    with registered(TOY):
        assert main(["info", str(folder)]) == 0
        text = capsys.readouterr().out
        assert f"toy-model: {translator.card.languages}" in text
        assert f"transformer: {get_kind('transformer').describe(translator.config)}" in text
        assert main(["translate", "-m", str(folder), "--max-len", "6", TEXT]) == 0
        assert capsys.readouterr().out.strip() == expected.text
        assert main(["convert", str(folder), "--out", str(out)]) == 0
    converted = load_translator(out)  # a plain checkpoint: it loads with the format gone
    assert converted.translate(TEXT, DECODE).tokens == expected.tokens
    assert read_card(out).name == "toy-model" and read_card(out).kind is get_kind("transformer")
    assert main(["convert", str(folder), "--out", str(tmp_path / "again.safetensors")]) == 2


def test_a_folder_no_format_reads_names_the_known_formats(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(CheckpointError, match="is a folder") as err:
        format_of(tmp_path)
    assert all(f.title in str(err.value) for f in folder_formats())
    with registered(TOY):
        with pytest.raises(CheckpointError) as err:
            read_card(tmp_path)
        assert "toy JSON folder (a test format)" in str(err.value)


def test_a_format_says_what_a_folder_it_does_not_read_holds(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))  # a Hugging Face folder, not Marian's
    with pytest.raises(CheckpointError, match="holds a 'bert' model \\(config.json model_type\\), which attnviz"):
        load_translator(tmp_path)


@pytest.mark.parametrize("text, reason", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),  # the parser recurses per level
    ('{"model_type": "marian", "d_model": ' + "1" * 5_000 + "}", "integer string conversion"),  # Python's digit cap
    ('{"model_type": "marian"', "Expecting"),  # cut off
    (b"\xff\xfe{}", "utf-8"),  # not UTF-8
])
def test_an_unreadable_config_is_refused_with_a_message_by_every_path(tmp_path, capsys, text, reason):
    path = tmp_path / "config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    for opens in (read_card, load_translator):
        with pytest.raises(CheckpointError, match=f"config.json cannot be read as JSON \\(.*{reason}"):
            opens(tmp_path)
    assert main(["info", str(tmp_path)]) == 1
    assert "cannot be read as JSON" in capsys.readouterr().err


# -- a file format: the loader runs any registered format, attnviz's checkpoint among them -----------------------


def _toy_file(path: Path) -> Path:
    """The checkpoint a ``.toyfile`` names on its one line."""
    return Path(path.read_text(encoding="utf-8").strip())


TOY_FILE = FolderFormat(name="toy-file", title="toy pointer file (a test format)",
                        recognises=lambda path: path.suffix == ".toyfile", inspect=None,
                        load=lambda path, dtype: CHECKPOINT.load(_toy_file(path), dtype), reads="file",
                        plan_load=lambda path: CHECKPOINT.plan_load(_toy_file(path)),
                        examine=lambda path: CHECKPOINT.examine(_toy_file(path)),
                        card=lambda path: CHECKPOINT.card(_toy_file(path)))


def test_attnviz_checkpoints_are_a_registered_file_format_asked_after_the_others(tmp_path):
    translator = make_toy_translator(seed=5)
    ckpt = tmp_path / "toy.safetensors"
    translator.save(ckpt)
    pointer = tmp_path / "model.toyfile"
    pointer.write_text(str(ckpt), encoding="utf-8")
    assert format_of(ckpt) is CHECKPOINT and CHECKPOINT.reads == "file" and CHECKPOINT not in folder_formats()
    assert format_of(pointer) is CHECKPOINT  # any file: its reader says what is wrong with it
    with registered(TOY_FILE):
        assert format_of(pointer) is TOY_FILE and format_of(ckpt) is CHECKPOINT
        assert read_card(pointer).config == translator.config
        assert inspect_model(pointer).card.parameters == count_parameters(translator.model)
        loaded = load_translator(pointer)
        assert loaded.translate(TEXT, DECODE).tokens == translator.translate(TEXT, DECODE).tokens
    with pytest.raises(CheckpointError, match="model.toyfile"):
        load_translator(pointer)  # the checkpoint reader: not a safetensors file


def test_the_loader_names_no_format():
    source = (Path(__file__).resolve().parents[2] / "attnviz" / "engine" / "loading.py").read_text(encoding="utf-8")
    imported = {node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)}
    hub = {name for name in imported if name and name.startswith("attnviz.engine.hub")}
    assert hub == {"attnviz.engine.hub", "attnviz.engine.hub.names", "attnviz.engine.hub.parsed",
                   "attnviz.engine.hub.registry"}  # names resolve a path; none reads a format
