"""Exports of a decoder-only LLM's alignment and head figures: ``attnviz align --out FILE.npz`` (the links and AER
arrays with a JSON sidecar holding what ``--json`` prints), and the prompt, languages and sentence spans in the JSON
of ``attnviz heads`` and ``attnviz head-importance`` (what reproduces their prompts)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz.cli.main import main
from attnviz.engine.analysis.align_export import link_array
from attnviz.engine.loading import load_translator

pytest.importorskip("transformers")
from tests.llm_folder import make_llm_folder  # noqa: E402  (needs transformers)


def test_pharaoh_lines_become_sentence_source_target_rows():
    rows = link_array(("0-0 1-2", "", "2-1"))
    assert rows.dtype == np.int32 and rows.tolist() == [[0, 0, 0], [0, 1, 2], [2, 2, 1]]
    assert link_array(()).shape == (0, 3)


def test_an_llm_alignment_is_exported_with_its_prompt_spans_and_settings(tmp_path, capsys):
    folder = make_llm_folder(tmp_path, "qwen2")
    src, ref, gold = tmp_path / "src.txt", tmp_path / "ref.txt", tmp_path / "gold.txt"
    src.write_text("Der Hund läuft .\nEine Katze .\n", encoding="utf-8")
    ref.write_text("The dog runs .\nA cat .\n", encoding="utf-8")
    gold.write_text("0-0 1-1 2-2 3-3\n0-0 1-1 2-2\n", encoding="utf-8")
    out = tmp_path / "align.npz"
    args = ["align", "-m", str(folder), "--src", str(src), "--tgt", str(ref), "--gold", str(gold), "--zero-based",
            "--layer", "2", "--head", "3"]
    assert main([*args, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert main([*args, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert f"wrote {out} and {out.with_suffix('.json')}" in captured.err
    sidecar = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert {k: v for k, v in sidecar.items() if k != "arrays"} == printed  # the sidecar is what --json prints
    assert sidecar["chosen"] == "layer 2 head 3" and len(sidecar["spans"]) == 2
    assert "Der Hund läuft ." in sidecar["first_prompt"] and sidecar["attention"].startswith("the prompt columns")
    with np.load(out, allow_pickle=False) as archive:
        assert sorted(archive.files) == ["aer_heads", "aer_layers", "links"]
        np.testing.assert_allclose(archive["aer_heads"], np.array(printed["aer_heads"]), atol=5e-5)
        assert archive["aer_layers"].shape == (3,) and archive["links"].shape[1] == 3
        assert archive["links"].tolist() == link_array(lines).tolist()  # the Pharaoh lines on stdout
    assert sidecar["arrays"] == {"links": list(archive_shape(out, "links")), "aer_heads": [3, 4], "aer_layers": [3]}


def archive_shape(path, name):
    with np.load(path, allow_pickle=False) as archive:
        return archive[name].shape


def test_out_must_name_an_npz_file(tmp_path, capsys):
    src = tmp_path / "src.txt"
    src.write_text("Der Hund .\n", encoding="utf-8")
    bad = tmp_path / "align.json"
    assert main(["align", "-m", str(make_llm_folder(tmp_path, "qwen2")), "--src", str(src), "--tgt", str(src),
                 "--out", str(bad)]) != 0
    assert (f"--out {bad}: give a file name ending in .npz (its JSON sidecar is written beside it)"
            in capsys.readouterr().err) and not bad.exists()


def _check_prompts(found: dict, translator, sources: list[str]) -> None:
    assert found["prompt"] == translator.prompt_template and found["prompt_languages"] == ["de", "en"]
    assert found["first_prompt"] == translator.prompt(sources[0]).text and "Der Hund läuft." in found["first_prompt"]
    assert len(found["spans"]) == len(sources)
    for (a, b), text in zip(found["spans"], sources, strict=True):
        roles = translator.prompt(text).roles
        assert set(roles[a:b]) == {"source"} and "source" not in roles[:a] + roles[b:]  # the sentence, only it
        assert {"template", "instruction"} <= set(roles[:a])


def test_heads_and_importance_json_carry_the_prompts(tmp_path, capsys):
    folder = make_llm_folder(tmp_path, "qwen2")
    sources = ["Der Hund läuft.", "Das Haus ist rot."]
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("\n".join(sources) + "\n", encoding="utf-8")
    ref.write_text("The dog runs.\nThe house is red.\n", encoding="utf-8")
    translator = load_translator(str(folder))
    assert main(["heads", "-m", str(folder), "--src", str(src), "--tgt", str(ref), "--json"]) == 0
    _check_prompts(json.loads(capsys.readouterr().out), translator, sources)
    out = tmp_path / "importance.json"
    assert main(["head-importance", "-m", str(folder), "--src", str(src), "--ref", str(ref), "--out", str(out)]) == 0
    _check_prompts(json.loads(out.read_text(encoding="utf-8")), translator, sources)
