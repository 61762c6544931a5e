"""Alignments from cross-attention: rows and shift, subword merging, Pharaoh, AER on hand-made gold sets."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine.analysis.alignment import (
    AlignmentReady,
    aer,
    align_steps,
    format_pharaoh,
    link_matrix,
    parse_pharaoh,
    to_links,
)
from attnviz.engine.analysis.run import AnalysisProgress
from attnviz.engine.errors import InputError
from tests.helpers import make_toy_translator


def test_aer_on_hand_made_gold_sets():
    assert aer([{(0, 0), (1, 1), (2, 1)}], [{(0, 0), (1, 1)}], [{(2, 1)}]) == pytest.approx(0.0)
    assert aer([{(0, 1)}], [{(0, 0)}], [set()]) == pytest.approx(1.0)
    assert aer([{(0, 0), (1, 0)}], [{(0, 0), (1, 1)}], [{(1, 0)}]) == pytest.approx(0.25)
    # corpus level: (1 + 2) + (0 + 0) matches over (2 + 2) + (1 + 1) links
    two = aer([{(0, 0), (1, 0)}, {(0, 1)}], [{(0, 0), (1, 1)}, {(0, 0)}], [{(1, 0)}, set()])
    assert two == pytest.approx(1 - 3 / 6)


def test_parse_and_format_pharaoh():
    sure, possible = parse_pharaoh("0-0 1?2 3-4-P 5-6-S 7p8")
    assert sure == {(0, 0), (5, 6)}
    assert possible == {(0, 0), (1, 2), (3, 4), (5, 6), (7, 8)}
    assert format_pharaoh({(2, 0), (0, 1), (0, 0)}) == "0-0 0-1 2-0"
    with pytest.raises(ValueError):
        parse_pharaoh("0-1-2-3")


def test_links_argmax_and_threshold():
    rows = np.array([[0.7, 0.2, 0.1], [0.1, 0.45, 0.45], [0.3, 0.3, 0.4]])  # [n = 3, m = 3]
    assert to_links(link_matrix(rows)) == {(0, 0), (1, 1), (2, 2)}  # ties: the first
    assert to_links(link_matrix(rows, threshold=0.4)) == {(0, 0), (1, 1), (2, 1), (2, 2)}


def test_align_tiny_model_against_its_own_links():
    translator = make_toy_translator(seed=0)
    sources, targets = ["q1 q2 q3", "q4 q5", "q6"], ["w3 w2 w1", "w5 w4", "w6"]
    result = list(align_steps(translator, sources, targets, layer=1, head=2, batch_size=2))[-1]
    assert isinstance(result, AlignmentReady) and len(result.alignments) == 3
    assert all(len(line.split()) == n for line, n in zip(result.alignments, (3, 2, 1)))  # argmax: one per word
    gold = [parse_pharaoh(line) for line in result.alignments]
    scored = list(align_steps(translator, sources, targets, gold, layer=1, head=2))[-1]
    assert scored.aer_heads.shape == (2, 4)
    assert scored.aer_heads[1, 2] == pytest.approx(0.0)
    assert scored.best_head()[2] == pytest.approx(0.0)
    assert 0.0 <= scored.aer_average <= 1.0 and scored.aer_layers.shape == (2,)
    with pytest.raises(InputError):
        list(align_steps(translator, sources, targets, [parse_pharaoh("0-5")] * 3))
    with pytest.raises(InputError):
        list(align_steps(translator, sources, targets, layer=1))


def _fake_attention(monkeypatch, *passes: list[np.ndarray]) -> None:
    """Replace the model's teacher-forced passes by hand-set cross-attention, one [L, H, T, S] per example."""
    import torch

    from attnviz.engine.analysis import alignment
    from attnviz.engine.analysis.corpus import Batch

    queue = list(passes)

    def batches(model, examples, kinds, batch_size):
        for index, (example, cross) in enumerate(zip(examples, queue.pop(0), strict=True)):
            assert cross.shape[-2:] == (len(example.tgt) - 1, len(example.src))  # decoder inputs x source ids
            yield Batch([index], None, None, {"cross": torch.tensor(cross[None], dtype=torch.float32)})

    monkeypatch.setattr(alignment, "attention_batches", batches)


def _sharp(rows: list[int], s: int, layers: int = 2, heads: int = 4) -> np.ndarray:
    """[L, H, T, S]: layer 1 uniform (argmax: the first word), layer 2 all weight of row t on source id rows[t]."""
    cross = np.full((layers, heads, len(rows), s), 1.0 / s)
    for t, column in enumerate(rows):
        cross[1:, :, t] = np.eye(s)[column]
    return cross


def test_aer_precision_recall_of_a_published_set_computed_by_hand(monkeypatch, tmp_path):
    from attnviz.engine.analysis.goldset import read_set

    # source q1 q2 q3 (ids <sos> q1 q2 q3 <eos>), target w1 w2 (decoder inputs <sos> w1 w2). Layer 2: row 0
    # (predicts w1) on q2, row 1 (predicts w2) on q1, row 2 (predicts <eos>, the shift row of w2) on q3.
    (tmp_path / "pairs.txt").write_text("q1 q2 q3 ||| w1 w2 \n")
    (tmp_path / "gold.txt").write_text("2-1 1p2 2-2 \n")  # 1-based: sure {1-0, 1-1}, possible {0-1}
    (tmp_path / "rev.txt").write_text("w1 w2 ||| q1 q2 q3\n")
    (tmp_path / "rev-gold.txt").write_text("1-2 2p1 2-2\n")  # the same links, target first
    for text, gold, reverse in (("pairs.txt", "gold.txt", False), ("rev.txt", "rev-gold.txt", True)):
        found = read_set(str(tmp_path / text), gold=str(tmp_path / gold), one_based=True, reverse=reverse)
        _fake_attention(monkeypatch, [_sharp([2, 1, 3], 5)])
        result = list(align_steps(make_toy_translator(), found.sources, found.targets, found.gold(),
                                  layer=1, head=0))[-1]
        # plain: A = {1-0, 0-1}: |A & S| = 1, |A & P| = 2 -> AER 1 - 3 / 4, precision 2 / 2, recall 1 / 2
        assert result.alignments == ("0-1 1-0",)
        assert result.scores["method"] == {"precision": 1.0, "recall": 0.5, "aer": 0.25, "predicted": 2}
        # shift: w1 reads row 1 (q1), w2 row 2 (q3): A = {0-0, 2-1} matches nothing
        assert result.scores["method, shift"]["aer"] == 1.0
        # layer 1 is uniform, so both words link q1: A = {0-0, 0-1}, |A & P| = 1 -> AER 1 - 1 / 4
        assert np.allclose(result.aer_heads, [[0.75] * 4, [0.25] * 4])
        assert result.scores["best head"] == {"layer": 2, "head": 1, "precision": 1.0, "recall": 0.5, "aer": 0.25,
                                              "predicted": 2}
        assert [row["aer"] for row in result.scores["layer average"]] == [0.75, 0.25]
        # diagonal, n = 2, m = 3: w1 -> round(1.5) = q2, w2 -> round(3) = q3: A = {1-0, 2-1}, one sure match
        assert result.scores["diagonal"] == {"precision": 0.5, "recall": 0.5, "aer": 0.5, "predicted": 2}
        assert result.settings["sure_links"] == 2 and result.settings["possible_links"] == 1


def test_a_tokenizer_that_splits_a_set_word_still_scores_on_the_set_words(monkeypatch):
    from attnviz.engine.text.tokenize import TokenizerSpec
    from attnviz.engine.translator import Translator

    toy = make_toy_translator()
    chars = Translator(toy.model, toy.src_vocab, toy.tgt_vocab, toy.src_spec, TokenizerSpec("en", mode="chars"))
    # the set's target words "w1 w22" are 5 character tokens: w 1 | w 2 2 (decoder inputs <sos> w 1 w 2 2)
    cross = np.zeros((2, 4, 6, 4))  # source ids <sos> q1 q2 <eos>
    cross[..., :5, 1:3] = [[0.9, 0.1], [0.1, 0.3], [0.2, 0.8], [0.2, 0.8], [0.9, 0.1]]
    _fake_attention(monkeypatch, [cross])
    gold = [({(0, 0), (1, 1)}, set())]
    result = list(align_steps(chars, [("q1", "q2")], [("w1", "w22")], gold, layer=0, head=0))[-1]
    # word w1 averages its rows (0.9, 0.1) and (0.25, 0.75) -> (0.575, 0.425): q1; w22 averages (0.2, 0.8) twice
    # and (0.9, 0.1) -> (0.433, 0.567): q2. Gold indices count the set's 2 words, not the 5 tokens.
    assert result.alignments == ("0-0 1-1",) and result.scores["method"]["aer"] == 0.0
    assert result.tokens.words == 4 and result.tokens.split_words == 2  # w1 and w22 in several tokens
    assert result.tokens.unknown == 5  # the toy vocabulary has no single characters: <unk>, still mapped


def test_word_attention_averages_target_rows_and_sums_source_columns():
    from attnviz.engine.analysis.setwords import WordTokens, word_attention

    cross = np.array([[0.1, 0.6, 0.2, 0.1, 0.0],   # predicts token a1 (word 0)
                      [0.0, 0.2, 0.2, 0.6, 0.0],   # predicts token a2 (word 0)
                      [0.0, 0.0, 0.5, 0.5, 0.0],   # predicts token b (word 1)
                      [0.5, 0.0, 0.0, 0.0, 0.5]])  # predicts <eos>
    tgt = WordTokens(("a1", "a2", "b"), (0, 0, 1), 2)
    src = WordTokens(("x1", "x2", "y"), (0, 0, 1), 2)  # columns 1..3 after <sos>
    words = word_attention(cross, tgt, src, 1)
    # row 0 over the source tokens: (0.6, 0.2, 0.1) / 0.9; words: x = 0.8 / 0.9, y = 0.1 / 0.9; row 1: 0.4, 0.6
    assert np.allclose(words, [[(0.8 / 0.9 + 0.4) / 2, (0.1 / 0.9 + 0.6) / 2], [0.5, 0.5]])
    assert np.allclose(words.sum(-1), 1.0)
    shifted = word_attention(cross, tgt, src, 1, shift=True)
    assert np.allclose(shifted[1], [0.0, 0.0])  # the <eos> row's weight is all on specials: renormalised to 0
    unread = WordTokens(("a1",), (0,), 2)  # word 1 gave no token: a zero row, and no link
    assert np.allclose(word_attention(cross, unread, src, 1)[1], 0.0)
    assert not link_matrix(word_attention(cross, unread, src, 1))[1].any()


def test_tokens_across_two_set_words_are_reported():
    from attnviz.engine.analysis.setwords import spanning_tokens

    class Joining:  # a tokenizer that reads "new york" as one token
        def normalized(self, text):
            return text.lower()

        def tokenize(self, text):
            return self.normalized(text).replace("new york", "newyork").split()

    assert spanning_tokens(Joining(), ["in", "New", "York"]) == ["newyork <- New York"]
    assert spanning_tokens(Joining(), ["in", "Paris"]) == []


def test_symmetrised_with_a_reverse_model(monkeypatch):
    # ids <sos> x1 x2 <eos> both ways; forward rows (predicting w1, w2) on q1, q1; reverse rows on w1, w2
    _fake_attention(monkeypatch, [_sharp([1, 1, 3], 4)], [_sharp([1, 2, 3], 4)])
    gold = [({(0, 0), (1, 1)}, set())]
    toy, turned = make_toy_translator(), make_toy_translator(langs=("en", "de"))
    result = list(align_steps(toy, ["q1 q2"], ["w1 w2"], gold, layer=1, head=0, reverse=turned,
                              symmetrise="intersection"))[-1]
    # forward: w1 -> q1, w2 -> q1; reverse (q1 q2 read as targets of w1 w2): q1 -> w1, q2 -> w2, turned round
    assert result.alignments == ("0-0",)
    assert result.scores["reverse model"]["aer"] == 0.0
    assert result.scores["union"]["predicted"] == 3 and result.scores["intersection"]["predicted"] == 1
    # grow-diag-final: from 0-0 the union's neighbour 0-1 (target w2 unaligned) and diagonal 1-1 (source q2
    # unaligned) are both added in one sweep
    assert result.scores["grow-diag-final"]["predicted"] == 3
    assert result.settings["symmetrisation"] == "intersection"


def test_a_reverse_model_of_the_same_direction_is_refused_before_any_work():
    """Given the forward model again, the reverse pass would read English with a German vocabulary: refused."""
    toy = make_toy_translator()
    with pytest.raises(InputError, match=r"--reverse-model translates de->en, but the reverse of this model "
                                         r"\(de->en\) is en->de"):
        next(align_steps(toy, ["q1 q2"], ["w1 w2"], reverse=toy))


def test_a_reverse_model_naming_no_language_is_taken():
    """A folder that names no language ("und") cannot be checked, so it is not refused."""
    toy = make_toy_translator()
    unnamed = make_toy_translator(langs=("und", "und"))
    assert isinstance(next(align_steps(toy, ["q1 q2"], ["w1 w2"], reverse=unnamed)), AnalysisProgress)
