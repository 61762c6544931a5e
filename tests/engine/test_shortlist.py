"""The opt-in vocabulary shortlist (``engine.search.shortlist``, ``translate --vmap``): CTranslate2's vmap format
read and refused plainly, a batch's candidates, the restricted projection equal to the full one at the candidates
(float32 and int8), the same tokens as the full search wherever the shortlist holds them, and a model kind that
cannot restrict its output refused."""

from __future__ import annotations

import copy

import pytest
import torch

from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import InputError
from attnviz.engine.models.quantize import quantize_int8
from attnviz.engine.search.shortlist import Shortlist, Vmap, restriction
from attnviz.engine.text.vocab import SPECIALS
from tests.helpers import SRC_WORDS, TGT_WORDS, make_toy_translator

SENTENCES = ["q1 q2 q3", "q4 q5", "q6 q7 q8 q9 q10", "q11 q0 q1"]


def _vmap(tmp_path, text: str) -> Vmap:
    path = tmp_path / "vmap.txt"
    path.write_text(text, encoding="utf-8")
    return Vmap.read(path)


@pytest.fixture
def word_map(tmp_path) -> Vmap:
    """The toy task's dictionary: each source word qi gives the target word wi."""
    return _vmap(tmp_path, "".join(f"{s}\t{t}\n" for s, t in zip(SRC_WORDS, TGT_WORDS, strict=True)))


def test_vmap_rules_ngrams_and_always_candidates(tmp_path):
    vmap = _vmap(tmp_path, "q1\tw1 w7\nq2 q3\tw9\n\tw0\nq1\tw2\n\n")
    assert vmap.rules == {("q1",): ("w1", "w7", "w2"), ("q2", "q3"): ("w9",), (): ("w0",)}
    assert vmap.longest == 2
    assert vmap.targets([["q1", "q2", "q3"]]) == {"w0", "w1", "w7", "w2", "w9"}
    assert vmap.targets([["q3", "q2"]]) == {"w0"}  # the bigram only in its order


def test_vmap_files_that_are_not_maps_are_refused(tmp_path):
    with pytest.raises(InputError, match=r"^--vmap \S+vmap\.txt: line 2 has 0 tabs; each line is 'SOURCE PIECES<TAB>"
                                         r"TARGET PIECES' \(one tab; nothing before it for always-candidates\)$"):
        _vmap(tmp_path, "q1\tw1\nq2 w2\n")
    with pytest.raises(InputError, match=r"holds no rules"):
        _vmap(tmp_path, "\n\n")
    with pytest.raises(InputError, match=r"^--vmap \S+missing\.txt cannot be read \(No such file or directory\)"):
        Vmap.read(tmp_path / "missing.txt")


def test_candidates_are_the_batch_rules_specials_and_forced_ids(trained_translator, tmp_path):
    vocab = trained_translator.tgt_vocab
    found = Shortlist.of(_vmap(tmp_path, "q1\tw1 zz\nq2\tw2\n"), vocab)
    assert found.unknown == 1  # zz is not a target word
    ids = found.candidates([["q1", "q5"]], forced=[vocab.id("w9"), -1])
    assert ids == sorted([*range(len(SPECIALS)), vocab.id("w1"), vocab.id("w9")])


@pytest.mark.parametrize("int8", [False, True])
def test_restricted_logits_are_the_full_ones_at_the_candidates(trained_translator, int8):
    translator = copy.deepcopy(trained_translator)
    if int8:
        quantize_int8(translator.model)
    model, ids = translator.model, torch.tensor([0, 3, 5, 8])
    hidden = torch.randn(3, model.cfg.d_model)
    small = restriction(model, ids.tolist(), len(translator.tgt_vocab)).project(hidden)
    torch.testing.assert_close(small, model.project(hidden)[:, ids], rtol=1e-5, atol=1e-5)
    full = restriction(model, ids.tolist(), len(translator.tgt_vocab)).logits(hidden)
    assert full.shape == (3, len(translator.tgt_vocab))
    outside = torch.ones(full.size(1), dtype=torch.bool)
    outside[ids] = False
    assert torch.isinf(full[:, outside]).all() and bool((full[:, outside] < 0).all())


@pytest.mark.parametrize("beam", [1, 4])
def test_the_same_tokens_where_the_shortlist_holds_them(trained_translator, word_map, beam):
    decode = DecodeConfig(beam=beam)
    expected = trained_translator.translate_batch_tokens(SENTENCES, decode)
    assert all(expected)
    shortlist = Shortlist.of(word_map, trained_translator.tgt_vocab)
    for size in (1, 3):  # per-batch candidates: one sentence's words, or three sentences' together
        assert trained_translator.translate_batch_tokens(SENTENCES, decode, size, shortlist) == expected


def test_a_token_outside_the_shortlist_is_never_produced(trained_translator, tmp_path):
    shortlist = Shortlist.of(_vmap(tmp_path, "q1\tw5\n"), trained_translator.tgt_vocab)
    for beam in (1, 3):
        out = trained_translator.translate_batch_tokens(["q1 q2 q3"], DecodeConfig(beam=beam, max_len=6), 8,
                                                        shortlist)
        assert set(out[0]) <= {"w5"}


def test_a_kind_that_cannot_restrict_its_output_is_refused():
    rnn = make_toy_translator(seed=0, kind="rnn-attention")
    with pytest.raises(InputError, match=r"^--vmap restricts a Transformer translation model's output vocabulary; a "
                                         r"\w+ cannot be restricted\. Translate without --vmap$"):
        restriction(rnn.model, [0, 1], len(rnn.tgt_vocab))
