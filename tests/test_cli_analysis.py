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
    assert "--layer 3 is out of range: this model has 2 cross-attention layers (1..2)" in capsys.readouterr().err
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


def test_align_reads_a_published_set_and_states_how_to_reproduce_it(files, capsys):
    (files / "pairs.txt").write_text("q1 q2 q3 ||| w3 w2 w1 \nq4 q5 ||| w5 w4 \n")
    (files / "gold.txt").write_text("1-3 2p2 3-1 \n1-2 2?1 \n")  # 1-based: "3-1" names source word 3 of 3
    base = ["align", "-m", str(files / "a.safetensors"), "--text", str(files / "pairs.txt"), "--gold",
            str(files / "gold.txt")]
    assert main([*base, "--json", "--layer", "2", "--head", "3", "--shift"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files"] == {"text": str(files / "pairs.txt"), "gold": str(files / "gold.txt")}
    assert report["direction"] == "de->en" and report["reverse"] is False
    assert report["indexing"] == "1-based" and report["indexing_decided_by"].startswith("detected: line 1")
    assert (report["method"], report["layer"], report["head"], report["shift"]) == ("argmax", 2, 3, True)
    assert report["symmetrisation"] is None and report["numbering"] == "1-based"
    assert (report["sure_links"], report["possible_links"], report["predicted_links"]) == (3, 2, 5)
    assert report["tokens"]["set_words"] == 10 and report["tokens"]["spanning_tokens"] == 0
    assert report["scores"]["method, shift"]["aer"] == report["aer_heads"][1][2]
    assert {"method", "best head", "layer average", "diagonal", "best head, shift"} <= set(report["scores"])
    make_toy_translator(seed=1, langs=("en", "de")).save(files / "b-en-de.safetensors", name="b-en-de")
    assert main([*base, "--one-based", "--reverse-model", str(files / "b-en-de.safetensors"), "--symmetrise",
                 "union"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    assert ("gold: one line per pair (i-j, ipj) (detected: line 1 holds i-j links); 1-based (--one-based)"
            in captured.err and "grow-diag-final" in captured.err)
    assert "reverse alignment: 2/2 sentences" in captured.err


def test_align_reads_the_naacl_2003_format_as_the_same_set(files, capsys):
    """The set above as the Hansards are published: '<s snum=...>' text files, one link per line, a NULL link."""
    (files / "t.de").write_text("<s snum=0001> q1 q2 q3 </s>\n<s snum=0002> q4 q5 </s>\n")
    (files / "t.en").write_text("<s snum=0001> w3 w2 w1 </s>\n<s snum=0002> w5 w4 </s>\n")
    (files / "t.wa").write_text("0002 2 1 P\n0001 1 3 S\n0001 2 2 P 0.5\n0001 3 1\n0001 0 2 S\n0002 1 2\n")
    (files / "p.txt").write_text("q1 q2 q3 ||| w3 w2 w1\nq4 q5 ||| w5 w4\n")
    (files / "g.txt").write_text("1-3 2p2 3-1\n1-2 2?1\n")
    model = str(files / "a.safetensors")
    assert main(["align", "-m", model, "--src", str(files / "t.de"), "--tgt", str(files / "t.en"), "--gold",
                 str(files / "t.wa"), "--json"]) == 0
    naacl = json.loads(capsys.readouterr().out)
    assert main(["align", "-m", model, "--text", str(files / "p.txt"), "--gold", str(files / "g.txt"), "--json"]) == 0
    talp = json.loads(capsys.readouterr().out)
    assert naacl["scores"] == talp["scores"] and naacl["aer_heads"] == talp["aer_heads"]
    assert (naacl["sure_links"], naacl["possible_links"], naacl["null_links_ignored"]) == (3, 2, 1)
    assert naacl["gold_format"] == "NAACL 2003 (one link per line)" and naacl["sentence_ids"] == "<s snum=...>"
    assert naacl["indexing_decided_by"] == "the NAACL 2003 format counts positions from 1"
    assert main(["align", "-m", model, "--src", str(files / "t.de"), "--tgt", str(files / "t.en"), "--gold",
                 str(files / "t.wa")]) == 0
    assert "gold: NAACL 2003 (one link per line) (detected: line 1 is 'sentence position_L1 position_L2 [S|P] " \
           "[confidence]'); 1-based (the NAACL 2003 format counts positions from 1); 1 links to NULL (position 0) " \
           "ignored" in capsys.readouterr().err


def test_align_refuses_a_bad_set_in_one_line(files, capsys):
    (files / "pairs2.txt").write_text("q1 q2 ||| w1 w2\n")
    base = ["align", "-m", str(files / "a.safetensors"), "--text", str(files / "pairs2.txt"), "--gold"]
    (files / "past.txt").write_text("1-1 2-3\n")
    assert main([*base, str(files / "past.txt"), "--one-based"]) == 2
    err = capsys.readouterr().err
    assert err == (f"attnviz: error: {files / 'past.txt'}, line 1: link 2-3 names target word 3, but the target "
                   "side has 2 words (1-based: --one-based; the file lists the source first); check --reverse and "
                   "--one-based\n")
    (files / "unsure.txt").write_text("1-1\n")
    assert main([*base, str(files / "unsure.txt")]) == 2
    assert "say it with --one-based (as the published sets) or --zero-based" in capsys.readouterr().err
    assert main([*base, str(files / "unsure.txt"), "--zero-based", "--reverse-head", "1"]) == 2
    assert "give --reverse-model too" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, str(files / "unsure.txt"), "--zero-based", "--one-based"])
