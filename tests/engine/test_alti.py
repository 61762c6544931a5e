"""ALTI and ALTI+ (engine.attribution.mixing.alti) on tiny seeded models in float64: one block's contributions
equal a computation written out by hand from the weights, the decomposition adds up to each block's output, the
ALTI+ shares are non-negative and sum to 1 per output token, the source share is 0 with every cross-attention head
off, and the kinds it is not defined for are refused with the reason."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnviz.engine.attribution.base import Attribution, attribution_steps
from attnviz.engine.attribution.mixing.alti import block_terms, layer_contributions
from attnviz.engine.attribution.mixing.capture import capture, teacher_forced_ids
from attnviz.engine.errors import InputError
from attnviz.engine.heads import HeadRef
from attnviz.engine.search.head_mask import heads_off
from tests.helpers import make_toy_lm, make_toy_translator

SRC = ("<sos>", "q3", "q1", "q4", "<eos>")
OUT = ("w4", "w1", "w3", "<eos>")


def _toy(kind: str = "transformer", **over):
    translator = make_toy_translator(3, kind, dropout=0.0, **over)
    translator.model.double()
    return translator


def _attribution(translator, src=SRC, out=OUT) -> Attribution:
    events = list(attribution_steps(translator, "alti-plus", src, out))
    return next(e for e in events if isinstance(e, Attribution))


def _layer_norm(z: np.ndarray, ln) -> np.ndarray:
    mean, var = z.mean(), z.var()
    return (z - mean) / math.sqrt(var + ln.eps) * ln.weight.detach().numpy() + ln.bias.detach().numpy()


def _by_hand(model, src_ids: list[int], pre: bool) -> tuple[np.ndarray, np.ndarray]:
    """The first encoder layer's ALTI contributions [S, S] and its attention block's output [S, D], written out with
    loops over heads, queries and keys from the weights (the paper's equations, nothing shared with the engine)."""
    layer = model.encoder[0]
    attn, ln = layer.self_attn, layer.res_attn.norm
    x = model.src_embed(torch.tensor([src_ids]))[0].detach().numpy()  # [S, D]
    s, d, heads = x.shape[0], x.shape[1], attn.heads
    dh = d // heads
    h_in = np.stack([_layer_norm(row, ln) for row in x]) if pre else x

    def proj(lin) -> np.ndarray:
        return h_in @ lin.weight.detach().numpy().T + lin.bias.detach().numpy()

    q, k, v = proj(attn.q_proj), proj(attn.k_proj), proj(attn.v_proj)
    w_o, b_o = attn.out_proj.weight.detach().numpy(), attn.out_proj.bias.detach().numpy()
    terms = np.zeros((s, s, d))
    for h in range(heads):
        cols = slice(h * dh, (h + 1) * dh)
        for i in range(s):
            scores = np.array([q[i, cols] @ k[j, cols] / math.sqrt(dh) for j in range(s)])
            alpha = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
            for j in range(s):
                terms[i, j] += alpha[j] * (w_o[:, cols] @ v[j, cols])
    for i in range(s):
        terms[i, i] += x[i]  # the residual is the query token's own
    c, outputs = np.zeros((s, s)), np.zeros((s, d))
    gamma = ln.weight.detach().numpy()
    for i in range(s):
        total = terms[i].sum(0) + b_o
        if pre:
            y, t_i = total, terms[i]
        else:
            y = _layer_norm(total, ln)
            sigma = math.sqrt(total.var() + ln.eps)
            t_i = np.stack([gamma * (t - t.mean()) / sigma for t in terms[i]])
        outputs[i] = y
        c[i] = [max(0.0, np.abs(y).sum() - np.abs(y - t).sum()) for t in t_i]
        c[i] /= c[i].sum()
    return c, outputs


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_one_layer_equals_the_hand_computed_contributions(norm):
    translator = _toy(norm=norm, enc_layers=1, dec_layers=1)
    src, tgt_in = teacher_forced_ids(translator, SRC, OUT)
    cap = capture(translator.model, src, tgt_in)
    expected, outputs = _by_hand(translator.model, src[0].tolist(), norm == "pre")
    np.testing.assert_allclose(cap.blocks["encoder"][0].out[0].numpy(), outputs, atol=1e-12)  # the same block
    got = layer_contributions(cap)["encoder"][0, 0]
    np.testing.assert_allclose(got, expected, atol=1e-12)
    assert not np.allclose(expected, np.eye(len(SRC)))  # the case mixes: a residual-only answer would fail


@pytest.mark.parametrize(("kind", "norm"), [("transformer", "post"), ("transformer", "pre"), ("marian", "post")])
def test_the_terms_add_up_to_every_block_output(kind, norm):
    translator = _toy(kind, norm=norm)
    src_tokens = SRC if translator.kind.source_bos else SRC[1:]
    cap = capture(translator.model, *teacher_forced_ids(translator, src_tokens, OUT))
    for blocks in cap.blocks.values():
        for block in blocks:
            terms, bias = block_terms(block)
            torch.testing.assert_close(terms.sum(2) + bias, block.out, atol=1e-12, rtol=0)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_the_terms_still_add_up_with_heads_off_and_the_rest_rescaled(norm):
    """Rescaled heads act through their factor (a HeadScale of each block's heads): the decomposition carries it."""
    translator = _toy(norm=norm)
    refs = [HeadRef("cross", 1, 0), HeadRef("encoder", 0, 2), HeadRef("decoder", 1, 3)]
    with heads_off(translator.model, refs, rescale=True):
        cap = capture(translator.model, *teacher_forced_ids(translator, SRC, OUT))
    heads = translator.config.heads
    assert torch.equal(cap.blocks["cross"][1].weights[:, 0], torch.zeros_like(cap.blocks["cross"][1].weights[:, 0]))
    ratio = cap.blocks["cross"][1].weights[:, 1].sum(-1)  # an on head's row: its factor H / (H - 1)
    torch.testing.assert_close(ratio, torch.full_like(ratio, heads / (heads - 1)), atol=0, rtol=1e-6)  # a float32 gate
    for blocks in cap.blocks.values():
        for block in blocks:
            terms, bias = block_terms(block)
            torch.testing.assert_close(terms.sum(2) + bias, block.out, atol=1e-12, rtol=0)


@pytest.mark.parametrize(("kind", "norm"), [("transformer", "post"), ("transformer", "pre"), ("marian", "post")])
def test_alti_plus_shares_are_non_negative_and_sum_to_one(kind, norm):
    translator = _toy(kind, norm=norm)
    src_tokens = SRC if translator.kind.source_bos else SRC[1:]
    result = _attribution(translator, src_tokens)
    layers = translator.config.dec_layers
    assert result.layered and result.source.shape == (layers, len(OUT), len(src_tokens))
    assert (result.source >= 0).all() and (result.prefix >= 0).all()
    np.testing.assert_allclose(result.source.sum(-1) + result.prefix.sum(-1), 1.0, atol=1e-12)
    share = result.source_share()
    assert ((share[-1] > 0.05) & (share[-1] < 0.95)).all()  # both sides contribute in a random model
    np.testing.assert_array_equal(np.triu(result.prefix[-1], 1), 0)  # no output rests on a later decoder input


def test_every_cross_attention_head_off_leaves_no_source_share():
    translator = _toy()
    layers, heads = translator.config.dec_layers, translator.config.heads
    refs = [HeadRef("cross", layer, head) for layer in range(layers) for head in range(heads)]
    with heads_off(translator.model, refs):
        result = _attribution(translator)
    np.testing.assert_array_equal(result.source, 0)
    np.testing.assert_allclose(result.prefix.sum(-1), 1.0, atol=1e-12)
    with heads_off(translator.model, refs[:1]):  # one head off: the source still counts
        assert (_attribution(translator).source_share()[-1] > 0.05).all()


def test_a_language_model_gets_alti_of_its_decoder_and_the_lstm_is_refused():
    lm = make_toy_lm(1)
    lm.model.double()
    result = _attribution(lm, (), tuple("abcd"))
    assert result.source.shape == (lm.config.dec_layers, 4, 0)
    np.testing.assert_allclose(result.prefix.sum(-1), 1.0, atol=1e-12)
    assert any("language model" in note for note in result.notes)
    lstm = make_toy_translator(0, "rnn-attention")
    with pytest.raises(InputError, match="ALTI\\+ is not defined for a LSTM encoder-decoder with Luong attention: "
                                         "its network offers no attention_block, run_layer and no probe point "
                                         "[*].[*].[*].v"):
        list(attribution_steps(lstm, "alti-plus", SRC, OUT))
