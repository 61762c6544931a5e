"""``attnviz heads`` and ``attnviz align`` on a tiny checkpoint and toy files, run in-process through ``main``."""

from __future__ import annotations

import json

import pytest

from attnviz.cli.main import main
from tests.helpers import make_toy_translator


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("analysis")
    make_toy_translator(seed=0).save(folder / "a.safetensors", name="a")
    make_toy_translator(seed=1).save(folder / "b.safetensors", name="b")
    (folder / "src.txt").write_text("q1 q2 q3\nq4 q5\nq6\n")
    (folder / "tgt.txt").write_text("w3 w2 w1\nw5 w4\nw6\n")
    return folder


def test_heads_json_has_every_head_and_the_thresholds(files, capsys):
    assert main(["heads", "-m", str(files / "a.safetensors"), "--src", str(files / "src.txt"), "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["sentences"] == 3 and report["targets"] == "greedy"
    assert len(report["heads"]) == 3 * 2 * 4  # encoder, decoder, cross x 2 layers x 4 heads
    assert set(report["thresholds"]) == {"positional", "sink", "diffuse", "aligning"}
    assert "attention: 3/3 sentences" in captured.err


def test_heads_table_with_references_and_compare(files, capsys):
    args = ["heads", "-m", str(files / "a.safetensors"), "--src", str(files / "src.txt"), "--tgt",
            str(files / "tgt.txt")]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("kind") and len(lines) == 1 + 24
    assert main([*args, "--compare", str(files / "b.safetensors"), "--json"]) == 0
    diff = json.loads(capsys.readouterr().out)
    assert diff["difference"] == "b - a" and len(diff["heads"]) == 24


def test_align_pharaoh_and_aer(files, capsys):
    base = ["align", "-m", str(files / "a.safetensors"), "--src", str(files / "src.txt"), "--tgt",
            str(files / "tgt.txt"), "--layer", "1", "--head", "2"]
    assert main(base) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all("-" in line for line in lines)
    (files / "gold.txt").write_text("\n".join(lines) + "\n")
    assert main([*base, "--gold", str(files / "gold.txt"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["aer_heads"][0][1] == 0.0 and report["best"]["aer"] == 0.0
    assert report["chosen"] == "layer 1 head 2" and report["numbering"] == "1-based"
    assert main([*base, "--average"]) == 2
    assert main([*base[:-4], "--layer", "3", "--head", "1"]) == 2  # layers count from 1 here too
    assert "--layer (1..2) and --head (1..4)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base[:-4], "--layer", "0", "--head", "1"])
    assert "must be from 1" in capsys.readouterr().err


def test_heads_numbers_layers_and_heads_from_1_as_mask_heads_reads_them(files, capsys):
    """A head copied from the table or the JSON into --mask-heads is the head the row describes."""
    from attnviz.engine.heads import HeadRef, parse_heads

    args = ["heads", "-m", str(files / "a.safetensors"), "--src", str(files / "src.txt")]
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["numbering"] == "1-based"
    rows = {(h["kind"], h["layer"], h["head"]): h for h in report["heads"]}
    assert set(rows) == {(k, la, h) for k in ("encoder", "decoder", "cross") for la in (1, 2) for h in (1, 2, 3, 4)}
    layout = {"encoder": (2, 4), "decoder": (2, 4), "cross": (2, 4)}
    assert parse_heads(rows["cross", 2, 3]["mask"], layout) == (HeadRef("cross", 1, 2),)
    assert main(args) == 0
    table = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert {(r[1], r[2]) for r in table} == {(str(la), str(h)) for la in (1, 2) for h in (1, 2, 3, 4)}
    assert main([*args, "--compare", str(files / "b.safetensors"), "--json"]) == 0
    diff = json.loads(capsys.readouterr().out)
    assert diff["numbering"] == "1-based" and min(h["layer"] for h in diff["heads"]) == 1


def test_heads_compare_refuses_another_architecture_before_any_work(files, capsys):
    make_toy_translator(seed=2, kind="rnn-attention", heads=1).save(files / "lstm.safetensors", name="lstm")
    args = ["heads", "-m", str(files / "a.safetensors"), "--src", str(files / "src.txt"), "--compare",
            str(files / "lstm.safetensors")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "lstm.safetensors cannot be compared with the loaded model" in err and "(cross 1x1 layers x heads)" in err
    assert "attention:" not in err  # no statistics were computed first
