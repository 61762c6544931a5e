"""The plain runtime (``engine.plain``): a MarianMT folder translated in numpy chooses the torch path's tokens, greedy
and beam, under attnviz's and the model's configured decoding (bans, forced end token, n-gram rule, stopping rules);
it never imports torch; and it declines (so the torch path runs) what it does not cover.

Tokens may differ only at exact near-ties (two scores equal to float32's last bits); these folders have none, and
every comparison below is exact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from attnviz.engine.config import DecodeConfig
from attnviz.engine.loading import load_translator
from attnviz.engine.plain.network import SMALL, Dense
from attnviz.engine.plain.translator import open_plain
from attnviz.engine.plain.weights import read_float32
from attnviz.engine.text.vocab import SOS_ID
from tests.folder_samples import write_marian_folder

SENTENCES = ["Zwei Hunde spielen im Schnee.", "Ein Mann fährt Fahrrad auf einer Straße.", "Kinder spielen.",
             "Eine Frau sitzt auf einer Bank und liest ein Buch im Park neben dem See."]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_marian_folder(tmp_path_factory.mktemp("plain") / "opus-mt-de-en", extra_vocab=40)


def _both(folder: Path, decode: DecodeConfig, batch: int = 128) -> tuple[list[list[str]], list[list[str]]]:
    plain, why = open_plain(folder)
    assert plain is not None, why
    return (plain.translate_batch_tokens(SENTENCES, decode, batch),
            load_translator(folder).translate_batch_tokens(SENTENCES, decode, batch))


@pytest.mark.parametrize("decode", [DecodeConfig(max_len=12), DecodeConfig(max_len=12, beam=4),
                                    DecodeConfig(max_len=9, beam=3, no_repeat_ngram=2, length_penalty=0.6)],
                         ids=["greedy", "beam4", "beam3-ngram"])
@pytest.mark.parametrize("batch", [1, 128])
def test_plain_chooses_the_torch_paths_tokens(folder, decode, batch):
    plain, torch_path = _both(folder, decode, batch)
    assert plain == torch_path
    assert all(len(tokens) > 0 for tokens in plain)


def test_configured_decoding_matches_too(folder):
    """The folder's generation_config.json (beam 4, <pad> banned, the end token forced at the limit), as the CLI
    reads it from the card."""
    plain, _ = open_plain(folder)
    assert plain is not None
    configured = plain.card.decoding
    assert configured is not None and configured.configured and configured.forced_eos >= 0
    for decode in (configured.replace(max_len=10), configured.replace(max_len=10, beam=1)):
        assert _both(folder, decode) == _both(folder, decode)[::-1]


@pytest.mark.data
def test_varied_lengths_and_stopping_rules_match(tmp_path, data_dir):
    """A folder whose end token is likely enough that sentences stop at various lengths: every stopping rule."""
    pytest.importorskip("transformers", reason="builds the folder with transformers (the test extra)")
    from attnviz.engine.search.tree import SearchTree
    from tests.marian_folder import build_marian_folder

    build_marian_folder(tmp_path / "m", data_dir)
    translator = load_translator(tmp_path / "m")
    for stopping in ("attnviz", "true", "false", "never"):
        rule = "gnmt" if stopping == "attnviz" else "power"
        decode = DecodeConfig(max_len=20, beam=4, early_stopping=stopping, length_rule=rule, configured=rule == "power")
        plain, torch_path = _both(tmp_path / "m", decode)
        assert plain == torch_path, stopping
        tree = SearchTree.from_events(translator.beam_steps(SENTENCES[3], decode))
        ended = {n.step.index for n in tree.nodes.values() if n.status == "finished"}
        assert len(ended) > 1  # hypotheses finished at different lengths: the ranking and stopping rules ran


def test_weights_read_are_the_files_tensors(folder):
    read, why = read_float32(folder / "model.safetensors")
    assert read is not None, why
    stored = load_file(folder / "model.safetensors")
    assert read.keys() == stored.keys()
    assert all(np.array_equal(read[name], stored[name]) and read[name].dtype == np.float32 for name in stored)


def test_blocked_products_equal_one_product():
    rng = np.random.default_rng(0)
    weight, bias = rng.standard_normal((300, 48), dtype=np.float32), rng.standard_normal(300, dtype=np.float32)
    dense = Dense(weight, bias)
    for rows in (1, 5, SMALL, SMALL + 1):
        x = rng.standard_normal((rows, 48), dtype=np.float32)
        assert dense(x).shape == (rows, 300)
        np.testing.assert_allclose(dense(x), x @ weight.T + bias, rtol=1e-5, atol=1e-5)


def _cli(folder: Path, *args: str, plain: bool = True) -> subprocess.CompletedProcess:
    code = ("import sys; from attnviz.cli.main import main; status = main(); "
            "print('TORCH', 'torch' in sys.modules, file=sys.stderr); sys.exit(status)")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "ATTNVIZ_PLAIN": "1" if plain else "0"}
    return subprocess.run([sys.executable, "-c", code, "translate", "-m", str(folder), *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)


@pytest.mark.parametrize("args", [("--beam", "1", "--threads", "1"),
                                  ("--beam", "3", "--json", "--decoding", "attnviz")])
def test_translate_never_imports_torch_and_says_the_same(folder, args):
    fast, slow = _cli(folder, *args, *SENTENCES[:2]), _cli(folder, *args, *SENTENCES[:2], plain=False)
    assert fast.returncode == slow.returncode == 0, fast.stderr + slow.stderr
    assert "TORCH False" in fast.stderr and "TORCH True" in slow.stderr
    assert fast.stdout == slow.stdout and len(fast.stdout.splitlines()) == 2
    assert fast.stderr.replace("TORCH False", "") == slow.stderr.replace("TORCH True", "")


def test_what_it_does_not_cover_runs_on_the_torch_path(folder, tmp_path):
    attention = tmp_path / "maps.json"
    done = _cli(folder, "--attention", str(attention), SENTENCES[2])
    assert done.returncode == 0 and "TORCH True" in done.stderr and attention.exists()
    assert "TORCH True" in _cli(folder, "--int8", SENTENCES[2]).stderr


def _copy(folder: Path, to: Path, change) -> Path:
    to.mkdir()
    for item in folder.iterdir():
        (to / item.name).write_bytes(item.read_bytes())
    change(to)
    return to


def test_it_declines_and_says_why(folder, tmp_path):
    def half(f: Path) -> None:
        save_file({k: v.astype(np.float16) for k, v in load_file(f / "model.safetensors").items()},
                  f / "model.safetensors")

    def gelu(f: Path) -> None:
        config = json.loads((f / "config.json").read_text())
        (f / "config.json").write_text(json.dumps(config | {"activation_function": "gelu"}))

    def damaged(f: Path) -> None:
        weights = load_file(f / "model.safetensors")
        weights["model.decoder.layers.0.fc1.weight"][0, 0] = np.nan
        save_file(weights, f / "model.safetensors")

    assert open_plain(_copy(folder, tmp_path / "half", half))[1].endswith("is stored as F16")
    assert open_plain(_copy(folder, tmp_path / "gelu", gelu))[1] == "its activation gelu runs on the torch path"
    assert open_plain(_copy(folder, tmp_path / "nan", damaged)) == (
        None, "tensor 'model.decoder.layers.0.fc1.weight' holds inf or NaN")
    assert open_plain(tmp_path / "nowhere") == (None, "not a MarianMT folder")
    broken = tmp_path / "broken.safetensors"
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, "x"], "data_offsets": [0, 8]}}).encode()
    broken.write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    assert read_float32(broken) == (None, "tensor 'w' has no readable offsets or shape")
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}).encode()
    broken.write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    assert read_float32(broken) == (None, "tensor 'w' is not laid out as its shape says")
    # a damaged folder is reported by the torch path, as before
    done = _cli(tmp_path / "nan", SENTENCES[2])
    assert done.returncode == 1 and "TORCH True" in done.stderr and "damaged" in done.stderr


def test_the_logits_match_the_torch_networks_at_every_step(folder):
    """The numpy network against the torch one on the same teacher-forced prefix: every step's logits over
    attnviz's ids (Marian's columns mapped back), not only the tokens a search chose."""
    import torch

    plain, _ = open_plain(folder)
    assert plain is not None
    translator = load_translator(folder)
    model, cols = translator.model, plain.columns
    for sentence in SENTENCES:
        src = translator.prepare_source(sentence)[1]
        out = translator.translate(sentence, DecodeConfig(max_len=12))
        prefix = [SOS_ID, *(translator.tgt_vocab.id(t) for t in out.tokens)][:-1]
        cache = plain.model.start(*plain.model.encode(np.asarray([src])))
        with torch.inference_mode():
            torch_cache = model.start(model.encode(torch.tensor([src])))
            for t, token in enumerate(prefix):
                ours = plain.model.step(np.asarray([token]), cache)[0, cols.col]  # [V] in attnviz's order
                theirs = model.step(torch.tensor([token]), torch_cache, False)[0][0].numpy()
                np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4, err_msg=f"{sentence!r} step {t}")
