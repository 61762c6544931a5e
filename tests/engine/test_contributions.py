"""Norm-weighted attention and rollout against hand-computed cases, and the hooks against the network's output."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.engine.analysis.contributions import (
    cross_rollout,
    head_value_vectors,
    norm_weighted,
    norm_weighted_pass,
    rollout,
    sentence_views,
)
from tests.helpers import make_toy_lm, make_toy_translator


def test_norm_weighted_hand_computed():
    values = torch.tensor([[[1.0, 1.0], [2.0, 2.0]]])  # [B=1, Tk=2, D=2]: two heads of width 1
    out_weight = torch.tensor([[1.0, 0.0], [0.0, 3.0]])  # head 0 -> output axis 0 (x1), head 1 -> axis 1 (x3)
    weights = torch.tensor([[[[0.5, 0.5]], [[0.75, 0.25]]]])  # [B, H=2, Tq=1, Tk=2]
    # ||f||: head 0 keys 1, 2; head 1 keys 3, 6 -> a ||f||: [0.5, 1.0] and [2.25, 1.5]
    raw = norm_weighted(weights, values, out_weight, normalize=False)
    assert torch.allclose(raw[0, :, 0], torch.tensor([[0.5, 1.0], [2.25, 1.5]]))
    norm = norm_weighted(weights, values, out_weight)
    assert torch.allclose(norm[0, :, 0], torch.tensor([[1 / 3, 2 / 3], [0.6, 0.4]]))


def test_head_vectors_add_up_to_the_attention_output():
    translator = make_toy_translator(seed=0)
    attn = translator.model.encoder[0].self_attn
    captured = {}
    hooks = [attn.v_proj.register_forward_hook(lambda m, i, o: captured.__setitem__("v", o)),
             attn.out_proj.register_forward_hook(lambda m, i, o: captured.__setitem__("out", o))]
    src = torch.tensor([[2, 5, 6, 7, 3]])
    with torch.inference_mode():
        weights = translator.model.encode(src, need_weights=True).attention[0]  # [1, H, S, S]
        for h in hooks:
            h.remove()
        f = head_value_vectors(captured["v"], attn.out_proj.weight, weights.size(1))  # [1, H, S, D]
        summed = torch.einsum("bhqk,bhkd->bqd", weights, f) + attn.out_proj.bias
    assert torch.allclose(summed, captured["out"], atol=1e-5)


def test_rollout_hand_computed():
    a1 = np.array([[1.0, 0.0], [0.5, 0.5]])
    a2 = np.array([[0.5, 0.5], [0.0, 1.0]])
    layers = np.stack([np.stack([a1, a1]), np.stack([a2, a2])])  # [L=2, H=2, S, S], both heads equal
    plain = rollout(layers, residual=False)
    assert np.allclose(plain[0], a1) and np.allclose(plain[1], [[0.75, 0.25], [0.5, 0.5]])
    with_residual = rollout(layers, residual=True)
    assert np.allclose(with_residual[1], [[0.8125, 0.1875], [0.25, 0.75]])
    mixed = np.stack([np.stack([np.eye(2), a1 * 2 - np.eye(2)])])  # heads average to a1
    assert np.allclose(rollout(mixed, residual=False)[0], a1)
    cross = np.array([[[[1.0, 0.0]], [[1.0, 0.0]]]])  # [L=1, H=2, T=1, S=2]
    assert np.allclose(cross_rollout(cross, layers, residual=False), [[[0.75, 0.25]]])


@pytest.mark.parametrize("kind", ["transformer", "rnn-attention"])
def test_sentence_views_rows_sum_to_one(kind):
    translator = make_toy_translator(seed=0, kind=kind)
    views = sentence_views(translator, ["<sos>", "q1", "q2", "<eos>"], ["<sos>", "w2", "w1"])
    expected = {"raw", "norm", "rollout", "rollout-residual"} if kind == "transformer" else {"raw"}
    assert set(views) == expected
    for kinds in views.values():
        for array in kinds.values():
            assert np.allclose(array.sum(-1), 1.0, atol=1e-5)
    if kind == "transformer":
        src, tgt_in = torch.tensor([[2, 5, 6, 3]]), torch.tensor([[2, 5, 4]])
        raw, norm = norm_weighted_pass(translator.model, src, tgt_in)["cross"]
        assert raw.shape == norm.shape == (2, 4, 3, 4)
        assert views["norm"]["encoder"].shape == views["rollout"]["encoder"].shape == (2, 4, 4, 4)


def test_language_model_has_norm_weighted_decoder_view():
    views = sentence_views(make_toy_lm(), [], ["<sos>", "a", "b"])
    assert set(views) == {"raw", "norm"} and set(views["norm"]) == {"decoder"}
