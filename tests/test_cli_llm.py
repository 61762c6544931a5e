"""``attnviz translate`` and ``info`` on a decoder-only LLM folder, with ``--prompt``."""

from __future__ import annotations

import pytest

from attnviz.cli.main import main
from tests.llm_folder import make_llm_folder

pytest.importorskip("transformers")


def test_translate_and_info_open_an_llm_folder(tmp_path, capsys):
    folder = make_llm_folder(tmp_path, "gemma3")
    assert main(["info", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Gemma-like decoder" in out and "4 query heads sharing 2 key/value heads" in out
    assert "2 sliding-window layers (6)" in out
    assert main(["translate", "-m", str(folder), "--max-len", "4", "Der Hund läuft."]) == 0
    first = capsys.readouterr()
    assert first.out.strip() and "limit of 4 tokens" in first.err
    assert main(["translate", "-m", str(folder), "--max-len", "4", "--prompt", "{src_lang}: {text}\\n{tgt_lang}:",
                 "Der Hund läuft."]) == 0
    assert capsys.readouterr().out.strip()


def test_prompt_is_refused_where_it_cannot_apply(tmp_path, capsys):
    folder = make_llm_folder(tmp_path, "qwen2")
    assert main(["translate", "-m", str(folder), "--prompt", "no field", "Der Hund."]) != 0
    assert "must hold {text} exactly once" in capsys.readouterr().err
