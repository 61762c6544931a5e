"""``attnviz info`` applies the metadata checks ``translate`` applies (issue 38: info exited 0 on checkpoints whose
metadata translate refused): both go through ``engine.checkpoints.parts.checkpoint_parts``. Each hostile header is
built here from a good checkpoint; info and translate must refuse it with the same one line."""

from __future__ import annotations

import pytest

from attnviz.cli.main import main
from tests.engine.test_header_schema import with_meta


def _drop_specials(meta):
    meta["src_vocab"] = meta["src_vocab"][4:] + meta["src_vocab"][:4]


def _repeat(meta):
    meta["tgt_vocab"][5] = meta["tgt_vocab"][4]


def _shrink(meta):
    meta["tgt_vocab"] = meta["tgt_vocab"][:-1]


CASES = {  # name -> (change of the metadata, words the message holds)
    "specials not first": (_drop_specials, "its src_vocab is invalid: a vocabulary must start with the specials"),
    "a repeated token": (_repeat, "its tgt_vocab is invalid: a vocabulary must not repeat tokens"),
    "vocab size against config": (_shrink, "vocabulary sizes"),
    "empty token": (lambda m: m["src_vocab"].__setitem__(6, ""), "every vocabulary entry must be a non-empty string"),
    "tokenizer mode": (lambda m: m["src_tokenizer"].update(mode="bogus"), "its src_tokenizer is invalid: tokenizer "
                                                                          "mode must be one of"),
    "tokenizer language": (lambda m: m["tgt_tokenizer"].update(lang="Deutsch"), "its tgt_tokenizer is invalid: "
                                                                               "language must be"),
    "tokenizer unknown field": (lambda m: m["tgt_tokenizer"].update(colour="red"), "its tgt_tokenizer is invalid"),
    "sentencepiece without its model": (lambda m: m["src_tokenizer"].update(mode="sentencepiece"),
                                        "holds no tokenizer.src model"),
    "languages not an object": (lambda m: m.update(languages=[1]), "its languages is invalid"),
    "language tag not in the vocabulary": (lambda m: m.update(languages={"tags": ["__xx__"], "tgt": "__xx__",
                                                                         "src": None, "src_suffix": False}),
                                           "language tag '__xx__' is not in the model's vocabulary"),
    "vocabulary missing": (lambda m: m.pop("tgt_vocab"), "the checkpoint has no tgt_vocab"),
}


@pytest.fixture(scope="module")
def good(tmp_path_factory, trained_translator):
    path = tmp_path_factory.mktemp("parity") / "good.safetensors"
    trained_translator.save(path, name="toy")
    return path.read_bytes()


@pytest.mark.parametrize("case", sorted(CASES))
def test_info_refuses_what_translate_refuses_with_the_same_line(case, good, tmp_path, capsys):
    change, words = CASES[case]
    path = tmp_path / "bad.safetensors"
    path.write_bytes(with_meta(good, change))
    assert main(["translate", "-m", str(path), "q1 q2"]) == 1
    refused = capsys.readouterr().err
    assert main(["info", str(path)]) == 1
    said = capsys.readouterr().err
    assert said == refused and said.count("\n") == 1 and words in said, (said, refused)
    assert said.startswith(f"attnviz: error: {path}: ")


def test_info_still_describes_a_good_checkpoint(good, tmp_path, capsys):
    path = tmp_path / "good.safetensors"
    path.write_bytes(good)
    assert main(["info", str(path)]) == 0
    assert "metadata (settings, vocabularies, tokenizers, language tags)" in capsys.readouterr().out
