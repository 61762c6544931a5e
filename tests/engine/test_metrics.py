import math

import pytest
import torch

from attnviz.engine.metrics import TokenStats, bleu_tok, chrf, sacrebleu_detok


def test_bleu_tok_on_a_hand_checked_example():
    # hypothesis "the cat sat on the mat" vs reference "the cat sat on a mat": 1-4 gram precisions
    # 5/6, 3/5, 2/4, 1/3; equal lengths, so no brevity penalty.
    score, signature = bleu_tok([["the", "cat", "sat", "on", "the", "mat"]], [["the", "cat", "sat", "on", "a", "mat"]])
    expected = 100 * math.exp((math.log(5 / 6) + math.log(3 / 5) + math.log(2 / 4) + math.log(1 / 3)) / 4)
    assert score == pytest.approx(expected, abs=1e-6)
    assert "tok:none" in signature


def test_perfect_and_detokenized_scores():
    assert bleu_tok([["a", "dog", "runs", "fast", "."]], [["a", "dog", "runs", "fast", "."]])[0] == pytest.approx(100)
    score, signature = sacrebleu_detok(["A dog runs fast."], ["A dog runs fast."])
    assert score == pytest.approx(100) and "tok:13a" in signature
    assert chrf(["A dog runs."], ["A dog runs."])[0] == pytest.approx(100)


def test_token_stats_mask_pad_and_add_up_across_batches():
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0, 5.0], [0.0, 0.0, 0.0, 0.0, 5.0]]])  # always predicts id 4
    stats = TokenStats()
    stats.add(logits, torch.tensor([[4, 1]]))  # second position is pad
    stats.add(logits, torch.tensor([[0, 4]]))
    assert stats.tokens == 3 and stats.correct == 2
    p4 = torch.tensor([0.0, 0, 0, 0, 5]).log_softmax(0)
    assert stats.loss == pytest.approx(-(2 * p4[4] + p4[0]).item() / 3, rel=1e-6)
    assert stats.ppl == pytest.approx(math.exp(stats.loss))
