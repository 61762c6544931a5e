"""``attnviz attribute`` on tiny checkpoints, run in-process through ``main``: the text table, --json fields, the
--out NPZ and its sidecar, the logit lens, and the refusals (method, foil, steps, settings a method does not read)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from attnviz.cli.main import main
from tests.helpers import make_toy_lm, make_toy_translator


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("attribute")
    make_toy_translator(seed=0).save(folder / "t.safetensors", name="toy")
    make_toy_translator(seed=0, kind="rnn-attention").save(folder / "rnn.safetensors", name="toy-rnn")
    make_toy_lm(seed=0).save(folder / "lm.safetensors", name="toy-lm")
    return folder


def _run(files, capsys, *args, model="t.safetensors"):
    code = main(["attribute", "-m", str(files / model), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_text_lists_every_output_token_with_its_contributors(files, capsys):
    code, out, err = _run(files, capsys, "--method", "gradient-x-input", "--target", "w3 w2", "q2 q3")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "method: gradient-x-input (target log-probability, aggregate sum)"
    assert lines[1].startswith("attributed: f = log p(chosen), at the token embeddings after")
    assert lines[2] == "source: <sos> q2 q3 <eos>"
    rows = lines[4:]
    assert [r.split()[:2] for r in rows] == [["1", "w3"], ["2", "w2"], ["3", "<eos>"]]
    assert "| source: " in rows[0] and "| prefix: <sos> " in rows[0]
    assert "gradients: 3/3 output tokens" in err


def test_json_holds_the_maps_settings_and_tokens(files, capsys):
    code, out, _ = _run(files, capsys, "--method", "integrated-gradients", "--steps", "8", "--baseline", "pad",
                        "--target", "w3 w2", "q2 q3", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["method"] == "integrated-gradients" and report["model"]["name"] == "toy"
    assert report["settings"] | {"steps": 8, "baseline": "pad", "aggregate": "sum"} == report["settings"]
    assert report["tokens"] == ["w3", "w2", "<eos>"] and report["decoder_inputs"] == ["<sos>", "w3", "w2"]
    assert np.array(report["source"]).shape == (1, 3, 4) and np.array(report["prefix"]).shape == (1, 3, 3)
    assert len(report["completeness_gap"]) == 3 and report["notes"][0].startswith("Completeness")
    assert report["source_text"] == "q2 q3"


def test_out_writes_the_arrays_and_a_sidecar(files, capsys, tmp_path):
    path = tmp_path / "a.npz"
    code, _, _ = _run(files, capsys, "--method", "saliency", "--foil", "w5", "--out", str(path), "q1 q4")
    assert code == 0
    arrays = np.load(path)
    sidecar = json.loads(path.with_suffix(".json").read_text())
    t = len(sidecar["tokens"])
    assert arrays["source"].shape == (1, t, 4) and arrays["prefix"].shape == (1, t, t)
    assert arrays["src_tokens"].tolist() == ["<sos>", "q1", "q4", "<eos>"] == sidecar["src_tokens"]
    assert sidecar["settings"]["foil"] == "w5" and sidecar["settings"]["aggregate"] == "l2"
    assert sidecar["settings"]["quantity"] == "log p(chosen) - log p('w5')" and sidecar["source_text"] == "q1 q4"
    np.testing.assert_allclose(arrays["source_share"], np.abs(arrays["source"]).sum(-1) / (
        np.abs(arrays["source"]).sum(-1) + np.abs(arrays["prefix"]).sum(-1)))


def test_logit_lens_table_and_json(files, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("q1 q2\n"))
    code, out, _ = _run(files, capsys, "--method", "logit-lens", "--top", "2")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("logit lens: each decoder layer's output through the output projection")
    assert lines[2].startswith("    layer 1: p ") and lines[3].startswith("    layer 2: p ")
    code, out, _ = _run(files, capsys, "--method", "logit-lens", "--json", "q1 q2")
    report = json.loads(out)
    assert report["layers"] == 2 and np.array(report["top_probs"]).shape[::2] == (2, 3)
    assert report["chosen_rank"][-1] == [1] * len(report["tokens"])


def test_language_model_and_lstm(files, capsys):
    code, out, _ = _run(files, capsys, "--method", "gradient-x-input", "--json", "abc", model="lm.safetensors")
    report = json.loads(out)
    assert code == 0 and report["src_tokens"] == [] and np.array(report["source"]).shape[-1] == 0
    assert report["tokens"][:3] == ["a", "b", "c"]
    code, _, err = _run(files, capsys, "--method", "logit-lens", "q1 q2", model="rnn.safetensors")
    assert code == 2 and "The logit lens is not defined for a " in err and "offers no read_out" in err
    code, out, _ = _run(files, capsys, "--method", "saliency", "q1 q2", model="rnn.safetensors")
    assert code == 0 and out.startswith("method: saliency")


@pytest.mark.parametrize(("args", "message"), [
    (["--method", "shap"], "--method: unknown method 'shap'; choose one of saliency, gradient-x-input, "),
    (["--method", "saliency", "--foil", "walks"], "The foil 'walks' is not in the model's output vocabulary"),
    (["--method", "gradient-x-input", "--steps", "8"], "Gradient x input does not use steps: it reads only "),
    (["--method", "saliency", "--target", "w1 zz"], "Not in the model's output vocabulary: zz"),
    (["--method", "logit-lens", "--foil", "w1"], "the logit lens takes none of --foil"),
    (["--method", "saliency", "--corrupt", "2=q5"], "Saliency does not use corrupt: it reads only "),
    (["--method", "patching", "--corrupt", "q1 q2 q3"], "The corrupted sentence reads as 5 tokens (1 <sos>, 2 q1, "
                                                        "3 q2, 4 q3, 5 <eos>) but the source as 4 ("),
    (["--method", "patching", "--corrupt", "7=q5"], "The edit names source position 7, but the source has 4 tokens"),
])
def test_refusals_are_one_line(files, capsys, args, message):
    code, out, err = _run(files, capsys, *args, "q1 q2")
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


def test_bad_numbers_and_input(files, capsys, monkeypatch):
    with pytest.raises(SystemExit):
        main(["attribute", "-m", str(files / "t.safetensors"), "--method", "integrated-gradients", "--steps", "0",
              "q1"])
    assert "--steps: must be from 1 to 1,024, not 0" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO("q1\nq2\n"))
    code, _, err = _run(files, capsys, "--method", "saliency")
    assert code == 2 and "attribute reads one sentence; standard input has 2 non-empty lines" in err


def test_method_list_says_which_methods_apply_to_the_model(files, capsys):
    code, out, _ = _run(files, capsys, "--method", "list")
    names = [line.split()[0] for line in out.splitlines()]
    assert code == 0 and {"saliency", "gradient-x-input", "integrated-gradients", "logit-lens"} <= set(names)
    code, out, _ = _run(files, capsys, "--method", "list", model="rnn.safetensors")
    assert code == 0 and out.splitlines()[-1].startswith("logit-lens             not for this model: its network "
                                                          "offers no read_out")


def test_patching_writes_its_maps_and_reads_back(files, capsys, tmp_path):
    path = tmp_path / "p.npz"
    code, out, err = _run(files, capsys, "--method", "patching", "--corrupt", "2=q5", "--target", "w3 w2",
                          "--out", str(path), "q2 q3")
    assert code == 0 and "activation patching: " in err
    assert out.splitlines()[0].startswith("method: patching (corrupt 2=q5, corrupted_source <sos> q5 q3 <eos>")
    arrays, sidecar = np.load(path), json.loads(path.with_suffix(".json").read_text())
    assert sidecar["method"] == "patching" and sidecar["layered"] and sidecar["settings"]["corrupt"] == "2=q5"
    assert sidecar["tokens"] == ["w3", "w2", "<eos>"] and sidecar["notes"][1].startswith("Corrupted run: source "
                                                                                          "token 2 ('q2') -> 'q5'")
    layers, heads = 2, 4  # the toy Transformer's
    assert arrays["source"].shape == (layers, 3, 4) and arrays["prefix"].shape == (layers, 3, 3)
    assert arrays["cross_heads"].shape == (3, layers, heads) and arrays["restorable"].shape == (3,)
    np.testing.assert_allclose(arrays["scores"], arrays["clean_logp"] - arrays["corrupt_logp"])
    restorable = arrays["restorable"].astype(bool)
    np.testing.assert_allclose(np.diagonal(arrays["prefix"][-1])[restorable], 1.0, atol=1e-4)
    assert np.all(np.triu(arrays["prefix"], 1) == 0)


def test_patching_is_listed_where_it_applies(files, capsys):
    _, out, _ = _run(files, capsys, "--method", "list")
    assert any(line.startswith("patching               Activation patching: ") for line in out.splitlines())
    _, out, _ = _run(files, capsys, "--method", "list", model="lm.safetensors")
    assert "patching               not for this model: a language model reads no source to corrupt" in out
