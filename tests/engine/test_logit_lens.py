"""The logit lens: the last decoder layer's reading is the model's own distribution (float64), earlier layers give
distributions too, and a kind without a residual stream (the LSTM) is refused with the reason."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.engine.attribution.forced import forced_ids
from attnviz.engine.attribution.logit_lens import logit_lens_steps
from attnviz.engine.errors import InputError
from attnviz.engine.text.vocab import PAD_ID, SOS_ID
from tests.helpers import make_toy_lm, make_toy_translator


def _lens(tr, out, top_k=3):
    return list(logit_lens_steps(tr, out.src_tokens, out.tokens, top_k=top_k))[-1]


@pytest.mark.parametrize("pre", [False, True])
def test_the_last_layer_reads_the_models_own_distribution(pre):
    tr = make_toy_translator(seed=2, norm="pre" if pre else "post")
    tr.model.double()
    out = tr.translate("q3 q1 q2")
    lens = _lens(tr, out, top_k=4)
    forced = forced_ids(tr, out.src_tokens, out.tokens)
    with torch.no_grad():
        logits = tr.model.project(tr.model.decode(forced.tgt_in[None], tr.model.encode(forced.src[None])).hidden)[0]
    logits[:, [PAD_ID, SOS_ID]] = float("-inf")
    probs = logits.softmax(-1)  # [T, V]
    np.testing.assert_allclose(lens.chosen_prob[-1], probs[torch.arange(len(out.tokens)), forced.tgt_out],
                               rtol=1e-12)
    np.testing.assert_allclose(lens.chosen_prob[-1], out.probabilities, rtol=1e-6)  # what decoding reported
    np.testing.assert_allclose(lens.top_probs[-1], probs.topk(4, -1).values.numpy(), rtol=1e-12)
    assert np.all(lens.chosen_rank[-1] == 1)  # greedy outputs are the last layer's top token
    assert lens.top_tokens[-1, :, 0].tolist() == list(out.tokens)
    assert lens.layers == tr.config.dec_layers and lens.top_probs.shape == (2, len(out.tokens), 4)
    np.testing.assert_allclose(lens.top_probs.sum(-1) <= 1 + 1e-12, True)
    assert np.all((lens.decided_at() >= 1) & (lens.decided_at() <= lens.layers))
    assert ("final LayerNorm" in lens.readout) == pre


def test_a_language_model_has_a_lens_and_the_lstm_is_refused():
    lm = make_toy_lm(seed=3)
    out = lm.translate("ab")
    lens = _lens(lm, out)
    assert lens.src_tokens == () and lens.chosen_prob.shape == (lm.config.dec_layers, len(out.tokens))
    forced_rank = lens.chosen_rank[-1, :2]  # the forced prefix need not be the model's choice
    assert np.all(forced_rank >= 1)
    rnn = make_toy_translator(kind="rnn-attention")
    out = rnn.translate("q1 q2")
    with pytest.raises(InputError, match="The logit lens is not defined for a .*: its network offers no read_out"):
        _lens(rnn, out)
    with pytest.raises(InputError, match="top_k must be a whole number from 1 to 50, not 0"):
        list(logit_lens_steps(lm, (), ("a",), top_k=0))
