"""``--mask-heads`` on ``translate`` and ``evaluate`` (real BLEU moves, bad specs get one clear line), and
``attnviz head-importance``: one entry per head, delta = baseline - BLEU, most important first, saved JSON."""

import json
import re
from pathlib import Path

import pytest

from attnviz.cli.main import main
from attnviz.engine.analysis.importance import ImportanceReady
from attnviz.engine.config import DecodeConfig
from attnviz.engine.heads import HeadRef

DE_EN = str(Path(__file__).resolve().parents[1] / "models" / "de-en-multi30k.safetensors")
SRC = "q1 q2 q3 q4 q5\nq6 q7 q8 q9\nq3 q1\nq10 q11 q2\nq4 q4 q9\n"
REF = "w5 w4 w3 w2 w1\nw9 w8 w7 w6\nw1 w3\nw2 w11 w10\nw9 w4 w4\n"


@pytest.fixture(scope="module")
def toy(tmp_path_factory, trained_translator):
    folder = tmp_path_factory.mktemp("heads")
    path = folder / "toy.safetensors"
    trained_translator.save(path, name="toy")
    (folder / "src.txt").write_text(SRC)
    (folder / "ref.txt").write_text(REF)
    return str(path), str(folder / "src.txt"), str(folder / "ref.txt")


def _evaluate(capsys, *args):
    assert main(["evaluate", "-m", DE_EN, "--limit", "40", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.data
def test_masking_cross_attention_lowers_real_bleu(data_dir, capsys):
    base = _evaluate(capsys, "--data-dir", str(data_dir))
    assert base["sentences"] == 40 and "heads_off" not in base
    off = _evaluate(capsys, "--data-dir", str(data_dir), "--mask-heads", "cross:1.*,cross:2.*,cross:3.*")
    assert off["heads_off"] == "cross:1.*,cross:2.*,cross:3.*" and off["rescale_heads"] is False
    assert off["bleu_tok"] < base["bleu_tok"] - 10  # without cross-attention the output ignores the source
    assert off["loss"] > base["loss"]  # the teacher-forced figures are measured with the heads off too
    one = _evaluate(capsys, "--data-dir", str(data_dir), "--mask-heads", "cross:2.4", "--rescale-heads")
    assert one["heads_off"] == "cross:2.4" and one["rescale_heads"] is True
    assert one["bleu_tok"] != base["bleu_tok"]
    assert main(["evaluate", "-m", DE_EN, "--limit", "5", "--data-dir", str(data_dir), "--mask-heads",
                 "enc:1.2"]) == 0
    assert "heads off enc:1.2" in capsys.readouterr().out


@pytest.mark.parametrize(("spec", "words"), [
    ("cross:4.1", "layers 1-2"), ("cross:1.9", "heads 1-4"), ("foo", "KIND:LAYER.HEAD"), (",", "names no head"),
])
def test_bad_head_specs_get_one_line_and_status_2(toy, capsys, spec, words):
    model, src, ref = toy
    for argv in (["translate", "-m", model, "--mask-heads", spec, "q1"],
                 ["evaluate", "-m", model, "--src", src, "--ref", ref, "--mask-heads", spec]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("attnviz: error: --mask-heads") and words in err and len(err.splitlines()) == 1
    assert main(["translate", "-m", model, "--rescale-heads", "q1"]) == 2
    assert "--mask-heads" in capsys.readouterr().err


def test_translate_with_heads_off_is_the_engines_masked_search(toy, trained_translator, capsys):
    model, _, _ = toy
    sentences = ["q1 q2 q3", "q7 q8 q9 q10"]
    assert main(["translate", "-m", model, "--mask-heads", "cross:1.*,cross:2.*", *sentences]) == 0
    decode = DecodeConfig(heads_off=[HeadRef("cross", la, h) for la in range(2) for h in range(4)])
    assert capsys.readouterr().out.splitlines() == trained_translator.translate_batch(sentences, decode)
    assert trained_translator.translate_batch(sentences, decode) != trained_translator.translate_batch(sentences)


def test_head_importance_ranks_every_head(toy, trained_translator, tmp_path, capsys):
    model, src, ref = toy
    out = tmp_path / "imp.json"
    assert main(["head-importance", "-m", model, "--src", src, "--ref", ref, "--json", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert "heads off: 25/25 decodes" in captured.err  # the progress line: the baseline and 3 kinds x 2 x 4 heads
    assert json.loads(out.read_text()) == data
    heads = data["heads"]
    assert len(heads) == 3 * 2 * 4
    assert {(h["kind"], h["layer"], h["head"]) for h in heads} == {
        (k, la, h) for k in ("encoder", "decoder", "cross") for la in (1, 2) for h in (1, 2, 3, 4)}
    deltas = [h["delta"] for h in heads]
    assert deltas == sorted(deltas, reverse=True)
    for h in heads:
        assert h["delta"] == pytest.approx(data["baseline_bleu"] - h["bleu"])
    top = heads[0]  # the BLEU reported for the top head is what evaluate measures with that head off
    assert main(["evaluate", "-m", model, "--src", src, "--ref", ref, "--json", "--mask-heads",
                 f"{top['kind']}:{top['layer']}.{top['head']}"]) == 0
    assert json.loads(capsys.readouterr().out)["bleu_tok"] == pytest.approx(top["bleu"])
    assert ImportanceReady.from_json(data).matrix("cross").shape == (2, 4)


def test_head_importance_table_and_kinds(toy, capsys):
    model, src, ref = toy
    assert main(["head-importance", "-m", model, "--src", src, "--ref", ref, "--kinds", "cross", "--limit", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("3 sentences") and "baseline bleu_tok" in lines[0]
    assert len(lines) == 2 + 8 and all(" cross " in line for line in lines[2:])
    assert main(["head-importance", "-m", model, "--src", src, "--ref", ref, "--kinds", "nope"]) == 2
    assert "enc, dec, cross" in capsys.readouterr().err


def test_head_importance_reads_the_validation_split_by_default_as_the_analysis_tab(toy, capsys):
    from attnviz.cli.main import build_parser
    from attnviz.engine.analysis.names import IMPORTANCE_SPLIT

    args = build_parser().parse_args(["head-importance", "-m", "x.safetensors"])
    assert args.split == "val" == IMPORTANCE_SPLIT  # the Analysis tab's default too (tests/gui)
    assert build_parser().parse_args(["evaluate", "-m", "x.safetensors"]).split == "test"  # the final figure
    model, src, ref = toy
    assert main(["head-importance", "-m", model, "--src", src, "--ref", ref, "--kinds", "cross", "--limit", "3"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert "95% interval: paired bootstrap over the sentences" in lines[0] and lines[1].endswith("95% interval")
    first = lines[2].split()
    low, high = float(first[6]), float(first[7])
    assert low <= high and (first[-1] == "*") == (low > 0 or high < 0)
    assert re.search(r"\d+ (s|min \d+ s|h \d+ min) left", captured.err)


def test_head_importance_on_a_sample_or_by_gradient_says_what_it_measured(toy, tmp_path, capsys):
    model, src, ref = toy
    assert main(["head-importance", "-m", model, "--src", src, "--ref", ref, "--limit", "3", "--sample", "4",
                 "--seed", "7"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "measured 4 of 24 heads, drawn at random (--seed 7); the others were not switched off"
    assert len(lines) == 3 + 4
    out = tmp_path / "grad.json"
    assert main(["head-importance", "-m", model, "--src", src, "--ref", ref, "--limit", "3", "--method", "gradient",
                 "--out", str(out)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("3 sentences") and "cost: 3 forward + backward passes (one per sentence" in lines[0]
    assert len(lines) == 2 + 24 and "gradients: 3/3 sentences" in captured.err
    scores = [h["score"] for h in json.loads(out.read_text())["heads"]]
    assert len(scores) == 24 and scores == sorted(scores)  # least important first
    assert main(["head-importance", "-m", model, "--src", src, "--ref", ref, "--method", "gradient",
                 "--sample", "3"]) == 1
    assert "the gradient estimate scores every head at once, so leave --sample out" in capsys.readouterr().err
