"""``attnviz translate --beam N --attention``/``--n-best K``: the printed translation is the beam's, with or
without them; the saved attention is the one the search captured for the chosen hypothesis (``SearchTree``), and the
n-best list is ranked by normalised score with the chosen hypothesis first."""

import json

import numpy as np
import pytest

from attnviz.cli.main import main
from attnviz.engine.config import DecodeConfig
from attnviz.engine.search.tree import SearchTree


@pytest.fixture(scope="module")
def model_path(tmp_path_factory, trained_translator):
    path = tmp_path_factory.mktemp("beam") / "toy.safetensors"
    trained_translator.save(path, name="toy")
    return str(path)


SENTENCES = ["q1 q2 q3", "q4 q4 q9", "q7", "q2 q8 q1 q5 q3"]


@pytest.mark.parametrize("beam", ["1", "5"])
def test_attention_never_changes_the_printed_translation(model_path, tmp_path, capsys, beam):
    assert main(["translate", "-m", model_path, "--beam", beam, "--json", *SENTENCES]) == 0
    plain = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    npz = tmp_path / "att.npz"
    assert main(["translate", "-m", model_path, "--beam", beam, "--json", "--attention", str(npz), *SENTENCES]) == 0
    with_attention = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["text"] for o in with_attention] == [o["text"] for o in plain]
    assert [o["tokens"] for o in with_attention] == [o["tokens"] for o in plain]
    data = np.load(npz)
    for i, o in enumerate(plain):
        cross = data[f"s{i}_cross"]
        assert cross.shape[2] in (len(o["tokens"]), len(o["tokens"]) + 1)  # + <eos> when the search ended
        np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-5)


def _tree(translator, text, decode):
    events = translator.beam_steps(text, decode)
    tree = SearchTree(next(events))
    for event in events:
        tree.add(event)
    return tree


@pytest.mark.parametrize("beam", [1, 4])
def test_saved_attention_is_the_search_trees_chosen_translation(model_path, trained_translator, tmp_path, capsys,
                                                                beam):
    npz = tmp_path / "att.npz"
    assert main(["translate", "-m", model_path, "--beam", str(beam), "--attention", str(npz), *SENTENCES]) == 0
    printed = capsys.readouterr().out.splitlines()
    data = np.load(npz)
    decode = DecodeConfig(beam=beam)
    for i, text in enumerate(SENTENCES):
        tree = _tree(trained_translator, text, decode)
        chosen = tree.translation(tree.chosen, trained_translator.detokenize)
        assert printed[i] == chosen.text
        for kind in ("encoder", "decoder", "cross"):
            np.testing.assert_allclose(data[f"s{i}_{kind}"], chosen.attention[kind], atol=1e-6)
        np.testing.assert_allclose(data[f"s{i}_probabilities"], chosen.probabilities, atol=1e-6)


def test_n_best_lists_k_hypotheses_best_first(model_path, capsys):
    assert main(["translate", "-m", model_path, "--beam", "4", *SENTENCES]) == 0
    beam_output = capsys.readouterr().out.splitlines()
    assert main(["translate", "-m", model_path, "--beam", "4", "--n-best", "3", *SENTENCES]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3 * len(SENTENCES)
    for i, output in enumerate(beam_output):
        mine = [r for r in rows if r[0] == str(i + 1)]
        assert [r[1] for r in mine] == ["1", "2", "3"]
        assert mine[0][4] == output  # the first hypothesis is what --beam prints
        scores = [float(r[2]) for r in mine]
        assert scores == sorted(scores, reverse=True)
        assert len({r[4] for r in mine}) == 3  # distinct hypotheses
    assert main(["translate", "-m", model_path, "--beam", "4", "--n-best", "2", "--json", *SENTENCES]) == 0
    objects = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for o, output in zip(objects, beam_output, strict=True):
        best = o["n_best"]
        assert len(best) == 2 and best[0]["text"] == o["text"] == output and best[0]["tokens"] == o["tokens"]
        assert best[0]["score"] >= best[1]["score"]
        for h in best:  # the normalised score is the log-probability over the GNMT length penalty (alpha 1)
            length = len(h["tokens"]) + 1  # + <eos>
            assert h["score"] == pytest.approx(h["logprob"] / ((5 + length) / 6), rel=1e-6)
            assert h["logprob"] < 0


def test_n_best_needs_a_beam_that_wide(model_path, capsys):
    assert main(["translate", "-m", model_path, "--beam", "2", "--n-best", "3", "q1"]) == 2
    assert "--n-best 3" in capsys.readouterr().err


def test_the_npz_sidecar_keeps_source_text_probabilities_top_k_and_entropy(model_path, tmp_path, capsys):
    npz = tmp_path / "att.npz"
    assert main(["translate", "-m", model_path, "--attention", str(npz), "q1 q2", "q3 q4 q5"]) == 0
    sidecar = json.loads(npz.with_suffix(".json").read_text())
    first = sidecar["translations"][0]
    assert first["source"] == "q1 q2" and [s["token"] for s in first["steps"]] == first["tokens"]
    assert all(0 < s["probability"] <= 1 and s["entropy"] >= 0 and len(s["topk"]) >= 2 for s in first["steps"])
    data = np.load(npz)
    assert data["s0_probabilities"].shape == (len(first["tokens"]),)
    assert data["s0_topk_tokens"].shape == data["s0_topk_probabilities"].shape
    assert data["s0_topk_tokens"][0, 0] == first["steps"][0]["topk"][0][0]
    np.testing.assert_allclose(data["s0_entropy"], [s["entropy"] for s in first["steps"]], atol=1e-5)
