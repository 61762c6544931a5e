"""``attnviz translate --beam N --attention``: the printed translation is the beam's, with or without
--attention, and the saved attention is that of the printed tokens (re-scored teacher-forced)."""

import json

import numpy as np
import pytest

from attnviz.cli import main
from attnviz.engine.config import DecodeConfig
from attnviz.engine.rescore import forced_translation, search_translations


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


def test_rescoring_a_given_output_records_its_attention(trained_translator):
    t = forced_translation(trained_translator, "q1 q2 q3", ["w1", "w9"], ended=True)
    assert t.tokens == ("w1", "w9", "<eos>") and t.text == trained_translator.detokenize(["w1", "w9"])
    assert t.attention["cross"].shape[2:] == (3, 5) and not any(s.forced for s in t.steps)
    greedy = trained_translator.translate("q1 q2 q3")
    again = forced_translation(trained_translator, "q1 q2 q3", list(greedy.words), ended=True)
    assert again.tokens == greedy.tokens  # greedy's own output re-scored gives greedy's maps
    for kind in ("encoder", "decoder", "cross"):
        np.testing.assert_allclose(again.attention[kind], greedy.attention[kind], atol=1e-5)
    np.testing.assert_allclose(again.probabilities, greedy.probabilities, atol=1e-5)


def test_search_translations_follow_the_beam(trained_translator):
    decode = DecodeConfig(beam=4, max_len=20)
    found = search_translations(trained_translator, [*SENTENCES, ""], decode)
    assert found[-1] is None
    assert [list(t.words) for t in found[:-1]] == trained_translator.translate_batch_tokens(SENTENCES, decode)


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
