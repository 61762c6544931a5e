"""Opening a model folder reads its files once (``hub.parsed``): the inspection that checks its size and the load
share one parse, within that opening only."""

from __future__ import annotations

import importlib

import pytest

from attnviz.engine.hub.parsed import once, parsed_once
from attnviz.engine.loading import load_translator
from tests.folder_samples import write_fairseq_folder, write_llm_folder, write_marian_folder

WRITERS = {"marian": (write_marian_folder, "marian_files"), "nllb": (write_fairseq_folder, "fairseq_files"),
           "llm": (write_llm_folder, "llm_files")}


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_a_folder_is_parsed_once_per_opening_and_afresh_the_next_time(tmp_path, monkeypatch, kind):
    writer, module_name = WRITERS[kind]
    folder = writer(tmp_path / kind)
    module = importlib.import_module(f"attnviz.engine.hub.{module_name}")
    reads = []
    original = module.read_config

    def counted(*args, **kwargs):
        reads.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "read_config", counted)
    first = load_translator(folder, "float32")
    assert len(reads) == 1  # the inspection's parse served the load
    second = load_translator(folder, "float32")
    assert len(reads) == 2  # a new opening reads the files again (they may have changed)
    assert first.translate("ein Hund").tokens == second.translate("ein Hund").tokens


def test_the_memo_is_scoped_and_a_failed_parse_is_not_kept(tmp_path):
    calls = []

    @once
    def parse(folder, flag):
        calls.append(flag)
        if flag == "bad":
            raise ValueError("unreadable")
        return object()

    outside = parse(tmp_path, "x"), parse(tmp_path, "x")
    assert outside[0] is not outside[1] and calls == ["x", "x"]  # no scope: read every time
    with parsed_once():
        a, b, c = parse(tmp_path, "x"), parse(tmp_path / "." , "x"), parse(tmp_path, "y")
        assert a is b and a is not c
        for _ in range(2):
            with pytest.raises(ValueError):
                parse(tmp_path, "bad")
    assert calls == ["x", "x", "x", "y", "bad", "bad"]
    assert parse(tmp_path, "x") is not a  # the scope ended: nothing kept
