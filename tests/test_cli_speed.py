"""``attnviz translate``'s speed options (``cli.speed``): ``--batch-size`` and ``--threads`` validated with one line
and changing no output, ``--int8`` saying which layers it quantised (the output projection among them), and the
opt-in ``--vmap`` shortlist said, equal to the full search where it holds the chosen words, and refused where it
cannot apply."""

from __future__ import annotations

import argparse

import pytest
import torch

from attnviz.cli.main import main
from attnviz.cli.speed import DEFAULT_BATCH, batch_size
from tests.helpers import SRC_WORDS, TGT_WORDS

SENTENCES = ["q1 q2 q3", "q4 q5", "q6 q7 q8 q9 q10", "q11 q0 q1"]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory, trained_translator):
    path = tmp_path_factory.mktemp("speed") / "toy.safetensors"
    trained_translator.save(path, name="toy")
    return str(path)


@pytest.fixture(scope="module")
def vmap(tmp_path_factory):
    path = tmp_path_factory.mktemp("vmap") / "words.vmap"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in zip(SRC_WORDS, TGT_WORDS, strict=True)), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--batch-size", "0", "argument --batch-size: must be from 1 to 4,096, not 0"),
    ("--batch-size", "5000", "argument --batch-size: must be from 1 to 4,096, not 5,000"),
    ("--batch-size", "x", "argument --batch-size: expected a whole number, not 'x'"),
    ("--threads", "0", "argument --threads: must be from 1 to 1,024, not 0"),
    ("--threads", "2.5", "argument --threads: expected a whole number, not '2.5'"),
])
def test_batch_size_and_threads_are_validated(model_path, capsys, flag, value, message):
    with pytest.raises(SystemExit) as exit_:
        main(["translate", "-m", model_path, flag, value, "q1 q2"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"attnviz translate: error: {message}"


def test_batch_size_and_threads_change_no_output(model_path, capsys):
    threads = torch.get_num_threads()
    assert main(["translate", "-m", model_path, "--beam", "3", *SENTENCES]) == 0
    expected = capsys.readouterr().out
    try:
        for size in ("1", "3", "64"):
            assert main(["translate", "-m", model_path, "--beam", "3", "--batch-size", size, "--threads", "1",
                         *SENTENCES]) == 0
            assert capsys.readouterr().out == expected
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)


ANALYSES = {  # every analysis command on the torch path, with what it needs beside the model
    "heads": ["--src", "SRC"], "align": ["--text", "PAIRS"], "attribute": ["--method", "alti-plus", "q1 q2"],
    "evaluate": ["--src", "SRC", "--ref", "REF"], "head-importance": ["--src", "SRC", "--ref", "REF", "--limit", "1"],
}


@pytest.mark.parametrize("command", ANALYSES)
def test_every_analysis_takes_threads_validated_and_used(command, model_path, tmp_path, capsys):
    (tmp_path / "s.txt").write_text("q1 q2\n")
    (tmp_path / "r.txt").write_text("w2 w1\n")
    (tmp_path / "p.txt").write_text("q1 q2 ||| w2 w1\n")
    files = {"SRC": tmp_path / "s.txt", "REF": tmp_path / "r.txt", "PAIRS": tmp_path / "p.txt"}
    rest = [str(files[a]) if a in files else a for a in ANALYSES[command]]
    with pytest.raises(SystemExit) as exit_:
        main([command, "-m", model_path, "--threads", "0", *rest])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (f"attnviz {command}: error: argument --threads: must be "
                                                         "from 1 to 1,024, not 0")
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert main([command, "-m", model_path, "--threads", "1", *rest]) == 0, capsys.readouterr().err
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)


def test_default_batch_size_follows_the_precision(trained_translator):
    args = argparse.Namespace(batch_size=None, int8=False)
    assert batch_size(args, trained_translator) == DEFAULT_BATCH["float32"]
    assert batch_size(argparse.Namespace(batch_size=None, int8=True), trained_translator) == DEFAULT_BATCH["int8"]
    assert batch_size(argparse.Namespace(batch_size=7, int8=True), trained_translator) == 7


def test_int8_says_its_layers_with_the_output_projection(model_path, trained_translator, capsys):
    assert main(["translate", "-m", model_path, "--int8", "q1 q2"]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("attnviz: int8: ")]
    cfg = trained_translator.config
    layers = 6 * cfg.enc_layers + 10 * cfg.dec_layers + 1  # q, k, v, out and 2 feed-forward; twice q, k, v, out
    assert said == [f"attnviz: int8: {layers} linear layers in int8: feed-forward, k_proj, out_proj, q_proj, v_proj in "
                    "every layer, and the output projection (out_proj); embeddings, norms and the attention softmax "
                    "stay float32"]


def test_vmap_is_said_and_keeps_the_chosen_words(model_path, vmap, capsys):
    for beam in ("1", "3"):
        assert main(["translate", "-m", model_path, "--beam", beam, *SENTENCES]) == 0
        expected = capsys.readouterr().out
        assert main(["translate", "-m", model_path, "--beam", beam, "--vmap", vmap, *SENTENCES]) == 0
        found = capsys.readouterr()
        assert found.out == expected
        assert f"attnviz: output restricted to the vocabulary shortlist of {vmap} (12 rules)" in found.err


def test_vmap_is_refused_where_it_cannot_apply(model_path, vmap, tmp_path, capsys):
    assert main(["translate", "-m", model_path, "--vmap", vmap, "--attention", str(tmp_path / "a.npz"),
                 "q1 q2"]) == 2
    assert capsys.readouterr().err.strip().endswith("--vmap restricts the batched search only; drop --attention "
                                                    "and --n-best, or --vmap")
    assert main(["translate", "-m", model_path, "--vmap", str(tmp_path / "none.vmap"), "q1 q2"]) == 2
    assert "cannot be read (No such file or directory)" in capsys.readouterr().err


def test_vmap_is_refused_for_an_llm(tmp_path, vmap, capsys):
    pytest.importorskip("transformers")
    from tests.llm_folder import make_llm_folder

    folder = make_llm_folder(tmp_path, "qwen2")
    assert main(["translate", "-m", str(folder), "--max-len", "2", "--vmap", vmap, "Der Hund."]) == 2
    assert capsys.readouterr().err.strip().endswith("attnviz: error: --vmap restricts a Transformer translation "
                                                    "model's output vocabulary; a CausalLM cannot be restricted. "
                                                    "Translate without --vmap")
