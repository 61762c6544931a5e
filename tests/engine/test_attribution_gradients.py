"""Gradient attribution on tiny seeded float64 models of every kind: gradient x input is the finite-difference
change of the log-probability, integrated gradients are complete, the contrast is the difference of two
attributions, and the refusals say what was wrong."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attnviz.engine.attribution.base import AttributionProgress, AttributionSettings, attribution_steps
from attnviz.engine.attribution.forced import embedded, embeddings_given, forced_ids
from attnviz.engine.errors import InputError
from attnviz.engine.models.probes import capture
from attnviz.engine.text.vocab import PAD_ID, SOS_ID, UNK_ID
from tests.helpers import make_toy_lm, make_toy_translator


def _model(kind: str):
    if kind == "char-lm":
        tr = make_toy_lm(seed=1, activation="gelu")
        text = "abcd"
    else:
        tr = make_toy_translator(seed=1, kind=kind, **({"activation": "gelu"} if kind == "transformer" else {}))
        text = "q1 q2 q3 q4"
    tr.model.double()
    return tr, tr.translate(text)


KINDS = ["transformer", "rnn-attention", "char-lm"]
EVERY_KIND = [*KINDS, "marian"]  # an imported MarianMT network: shared, tied embeddings and no <sos> on the source


def _attribute(tr, method, src, tokens, **settings):
    return list(attribution_steps(tr, method, src, tokens, AttributionSettings(**settings)))[-1]


def token_tables(model):
    """(source or None, target) as (embedding module, scale): read here from the networks' own attributes, so the
    finite differences below do not go through the probe points the methods use."""
    def find(name):
        embed = getattr(model, name, None)
        table = getattr(embed, "tokens", embed)
        return None if table is None else SimpleNamespace(module=table, scale=float(getattr(embed, "scale", 1.0)))

    return (find("src_embed") if model.has_source else None), find("tgt_embed")


def _log_probs(tr, src_tokens, tokens, side=None, position=None, factor=1.0, every=None) -> torch.Tensor:
    """log p(chosen) of every output token [T], computed here from the network's own calls, with one token's
    embedding (``side`` "src" or "tgt", at ``position``) multiplied by ``factor``, or (``every``: a token id)
    every token's embedding on both sides replaced by that token's."""
    model, forced = tr.model, forced_ids(tr, src_tokens, tokens)
    src, tgt = token_tables(model)

    def change(module, inputs, output):
        output = output.clone()
        if every is not None:
            output[:] = module.weight[every]
        else:
            output[:, position] *= factor
        return output

    tables = [t.module for t in (src, tgt) if t is not None] if every is not None else \
        [] if side is None else [(src if side == "src" else tgt).module]
    hooks = [table.register_forward_hook(change) for table in tables]
    try:
        with torch.no_grad():
            logits = model.project(model.decode(forced.tgt_in[None], model.encode(forced.src[None])).hidden)[0]
    finally:
        for hook in hooks:
            hook.remove()
    logits[:, [PAD_ID, SOS_ID]] = float("-inf")  # as decoding rules them out
    return logits.log_softmax(-1)[torch.arange(len(tokens)), forced.tgt_out]


@pytest.mark.parametrize("kind", EVERY_KIND)
def test_gradient_x_input_is_the_finite_difference_of_scaling_a_token(kind):
    tr, out = _model(kind)
    result = _attribute(tr, "gradient-x-input", out.src_tokens, out.tokens)
    assert result.settings["aggregate"] == "sum" and result.settings["quantity"] == "log p(chosen)"
    np.testing.assert_allclose(result.scores, _log_probs(tr, out.src_tokens, out.tokens).numpy(), atol=1e-12)
    eps = 1e-6
    sides = [("tgt", result.prefix[0])] + ([("src", result.source[0])] if tr.has_source else [])
    for side, values in sides:
        for j in range(values.shape[1]):
            up = _log_probs(tr, out.src_tokens, out.tokens, side, j, 1 + eps)
            down = _log_probs(tr, out.src_tokens, out.tokens, side, j, 1 - eps)
            np.testing.assert_allclose(values[:, j], ((up - down) / (2 * eps)).numpy(), atol=1e-7)
    assert np.all(np.triu(result.prefix[0], 1) == 0)  # a later decoder input never reaches an earlier step


@pytest.mark.parametrize("kind", EVERY_KIND)
def test_integrated_gradients_add_up_to_the_change_from_the_baseline(kind):
    tr, out = _model(kind)
    result = _attribute(tr, "integrated-gradients", out.src_tokens, out.tokens, steps=64)
    total = result.source[0].sum(-1) + result.prefix[0].sum(-1)
    delta = result.scores - result.extras["baseline_scores"]
    np.testing.assert_allclose(total, delta, rtol=0.01)
    np.testing.assert_allclose(result.extras["completeness_gap"], total - delta, atol=1e-12)
    assert result.notes[0].startswith("Completeness: the attributions of each output token sum to f(input) - ")
    assert result.settings["steps"] == 64 and result.settings["baseline"] == "zero"


def test_integrated_gradients_from_another_baseline_start_there():
    tr, out = _model("transformer")
    result = _attribute(tr, "integrated-gradients", out.src_tokens, out.tokens, steps=64, baseline="unk")
    base = _log_probs(tr, out.src_tokens, out.tokens, every=UNK_ID)  # f with every token read as <unk>
    np.testing.assert_allclose(result.extras["baseline_scores"], base.numpy(), atol=1e-12)
    total = result.source[0].sum(-1) + result.prefix[0].sum(-1)
    np.testing.assert_allclose(total, result.scores - result.extras["baseline_scores"], rtol=0.01)


@pytest.mark.parametrize("kind", KINDS)
def test_contrastive_gradient_x_input_is_the_difference_of_the_two_attributions(kind):
    tr, out = _model(kind)
    foil = "w5" if tr.has_source else "e"
    contrast = _attribute(tr, "gradient-x-input", out.src_tokens, out.tokens, foil=foil)
    assert contrast.settings["quantity"] == f"log p(chosen) - log p('{foil}')"
    chosen = _attribute(tr, "gradient-x-input", out.src_tokens, out.tokens)
    for t in range(len(out.tokens)):  # the foil in place of output t: same decoder inputs up to t
        other = _attribute(tr, "gradient-x-input", out.src_tokens, (*out.tokens[:t], foil))
        for name in ("source", "prefix"):
            cols = getattr(other, name).shape[-1]  # the prefix up to t: later columns are 0 in both
            mine, theirs = getattr(chosen, name)[0, t, :cols], getattr(other, name)[0, t]
            np.testing.assert_allclose(getattr(contrast, name)[0, t, :cols], mine - theirs, atol=1e-10)
        np.testing.assert_allclose(contrast.scores[t], chosen.scores[t] - other.scores[t], atol=1e-10)


def test_saliency_is_the_gradient_norm_and_bounds_gradient_x_input():
    tr, out = _model("transformer")
    saliency = _attribute(tr, "saliency", out.src_tokens, out.tokens)
    gxi = _attribute(tr, "gradient-x-input", out.src_tokens, out.tokens)
    assert saliency.settings["aggregate"] == "l2" and np.all(saliency.source >= 0)
    src, _ = token_tables(tr.model)
    forced = forced_ids(tr, out.src_tokens, out.tokens)
    norms = (src.module(forced.src) * src.scale).norm(dim=-1).detach().numpy()  # [S]
    assert np.all(np.abs(gxi.source[0]) <= saliency.source[0] * norms + 1e-12)  # |g . x| <= |g| |x|
    l2 = _attribute(tr, "gradient-x-input", out.src_tokens, out.tokens, aggregate="l2")
    assert np.all(l2.source >= np.abs(gxi.source) / np.sqrt(tr.config.d_model) - 1e-12)


def test_probability_target_is_the_chain_rule_of_the_log_probability():
    tr, out = _model("transformer")
    logp = _attribute(tr, "gradient-x-input", out.src_tokens, out.tokens)
    prob = _attribute(tr, "gradient-x-input", out.src_tokens, out.tokens, target="probability")
    np.testing.assert_allclose(prob.scores, np.exp(logp.scores), atol=1e-12)
    np.testing.assert_allclose(prob.source[0], logp.source[0] * np.exp(logp.scores)[:, None], atol=1e-10)


def test_refusals_say_what_was_wrong():
    tr, out = _model("transformer")
    with pytest.raises(InputError, match=r"The foil 'walks' is not in the model's output vocabulary; choose one "):
        _attribute(tr, "saliency", out.src_tokens, out.tokens, foil="walks")
    with pytest.raises(InputError, match=r"The foil 'w1 w2' is 2 tokens for this model \(w1, w2\); a foil is one"):
        _attribute(tr, "saliency", out.src_tokens, out.tokens, foil="w1 w2")
    with pytest.raises(InputError, match="Not in the model's output vocabulary: zz"):
        _attribute(tr, "saliency", out.src_tokens, ("zz", "<eos>"))
    with pytest.raises(InputError, match="Gradient x input does not use steps"):
        _attribute(tr, "gradient-x-input", out.src_tokens, out.tokens, steps=8)
    lm, text = _model("char-lm")
    result = _attribute(lm, "saliency", (), text.tokens)
    assert result.source.shape == (1, len(text.tokens), 0) and np.all(result.source_share() == 0)
    same = _attribute(tr, "saliency", out.src_tokens, out.tokens, foil=out.tokens[0])
    assert same.notes[-1].startswith("The foil is the chosen token at output step 1 (")
    assert np.all(same.source[0, 0] == 0)


@pytest.mark.parametrize("method", ["gradient-x-input", "integrated-gradients"])
def test_a_stopped_run_yields_nothing_more(method):
    tr, out = _model("transformer")
    stop, events = threading.Event(), []
    for event in attribution_steps(tr, method, out.src_tokens, out.tokens, stop=stop):
        events.append(event)
        stop.set()
    assert len(events) == 1 and isinstance(events[0], AttributionProgress)


def test_given_embeddings_stay_in_their_thread():
    tr, out = _model("transformer")
    model, forced = tr.model, forced_ids(tr, out.src_tokens, out.tokens)
    _, tgt = token_tables(model)
    zeros = torch.zeros(1, len(out.tokens), tr.config.d_model, dtype=torch.float64)
    seen = {}

    def read():
        with capture(model, ["embed.tgt"]) as got:
            model.decode(forced.tgt_in[None], model.encode(forced.src[None]))
        return got["embed.tgt"]

    with embeddings_given(model, None, zeros):
        other = threading.Thread(target=lambda: seen.update(other=read()))
        other.start()
        other.join()
        seen["mine"] = read()
    assert torch.equal(seen["other"][0], tgt.module.weight[forced.tgt_in] * tgt.scale)  # looked up as usual
    assert torch.equal(seen["mine"], zeros)
    assert torch.equal(embedded(model, forced)[1], seen["other"][0])


def test_passes_keep_their_rows_within_the_activation_budget():
    from attnviz.engine.attribution.gradients import ACTIVATION_BUDGET, LOGIT_BUDGET, MAX_ROWS, _chunk_rows

    per_row = 60_000_000  # a Qwen2.5-0.5B-shaped LLM over a 100-token prompt and a 20-token output
    assert _chunk_rows(151_936, 640, per_row) == ACTIVATION_BUDGET // per_row == 6
    assert _chunk_rows(151_936, 640) == LOGIT_BUDGET // 151_936  # without a size, the logit budget alone
    assert _chunk_rows(1_000, 640, 1_000) == MAX_ROWS and _chunk_rows(1_000, 640, 10 ** 12) == 1
