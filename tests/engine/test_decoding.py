import numpy as np
import pytest
import torch

from attnviz.engine.config import DecodeConfig
from attnviz.engine.corpus.batching import pad_batch
from attnviz.engine.errors import InputError
from attnviz.engine.events import DecodeStep, EncoderPass
from attnviz.engine.search.torch_batch import beam_batch, greedy_batch
from tests.helpers import make_toy_translator

SENTENCES = ["q1 q2 q3", "q4 q5", "q0 q7 q9 q11 q3 q2", "q6"]


def test_steps_yield_an_encoder_pass_then_one_step_per_token(trained_translator):
    events = list(trained_translator.steps("q1 q2 q3"))
    first, steps = events[0], events[1:]
    assert isinstance(first, EncoderPass) and all(isinstance(e, DecodeStep) for e in steps)
    assert first.src_tokens == ("<sos>", "q1", "q2", "q3", "<eos>")
    assert first.encoder_attention.shape == (2, 4, 5, 5)
    assert [s.token for s in steps] == ["w3", "w2", "w1", "<eos>"]
    for t, step in enumerate(steps):
        assert step.index == t
        assert step.self_attention.shape == (2, 4, t + 1) and step.cross_attention.shape == (2, 4, 5)
        probs = [p for _, p in step.topk]
        assert len(step.topk) == 10 and probs == sorted(probs, reverse=True) and sum(probs) <= 1 + 1e-6
        assert step.topk[0] == (step.token, step.probability)
        assert 0 <= step.entropy <= np.log(len(trained_translator.tgt_vocab))
    assert steps[0].probability > 0.5  # trained: confident


@pytest.mark.parametrize("fixture", ["random_translator", "trained_translator"])
def test_cached_decoding_equals_recomputation(fixture, request):
    translator = request.getfixturevalue(fixture)
    for text in SENTENCES:
        cached = list(translator.steps(text, DecodeConfig(max_len=12)))
        recomputed = list(translator.steps(text, DecodeConfig(max_len=12), recompute=True))
        assert [e.token for e in cached[1:]] == [e.token for e in recomputed[1:]]
        for a, b in zip(cached[1:], recomputed[1:]):
            np.testing.assert_allclose(a.self_attention, b.self_attention, atol=1e-5)
            np.testing.assert_allclose(a.cross_attention, b.cross_attention, atol=1e-5)
            assert a.probability == pytest.approx(b.probability, abs=1e-5)


def test_translation_matrices_match_steps_and_rows_sum_to_one(trained_translator):
    t = trained_translator.translate("q1 q2 q3 q4")
    assert t.tokens == ("w4", "w3", "w2", "w1", "<eos>") and t.words == t.tokens[:-1]
    assert t.text == "w4 w3 w2 w1"
    dec, cross = t.attention["decoder"], t.attention["cross"]
    assert t.attention["encoder"].shape == (2, 4, 6, 6) and dec.shape == (2, 4, 5, 5) and cross.shape == (2, 4, 5, 6)
    np.testing.assert_allclose(dec.sum(-1), 1, atol=1e-5)
    np.testing.assert_allclose(cross.sum(-1), 1, atol=1e-5)
    assert np.all(np.triu(dec, 1) == 0)
    for step in t.steps:
        np.testing.assert_array_equal(cross[:, :, step.index], step.cross_attention)
    assert t.axis_labels("decoder") == (t.tokens, ("<sos>", "w4", "w3", "w2", "w1"))


def test_max_len_stops_decoding(random_translator):
    steps = [e for e in random_translator.steps("q1 q2", DecodeConfig(max_len=3)) if isinstance(e, DecodeStep)]
    assert len(steps) <= 3


def test_decoding_never_passes_the_position_table(random_translator):
    steps = [e for e in random_translator.steps("q1", DecodeConfig(max_len=500)) if isinstance(e, DecodeStep)]
    assert len(steps) <= random_translator.config.max_positions


def test_too_long_source_is_truncated_with_a_warning(trained_translator):
    t = trained_translator.translate(" ".join(["q1"] * 40))
    assert len(t.src_tokens) == 24 and t.src_tokens[-1] == "<eos>"
    assert any("40 tokens" in w and "18 were dropped" in w for w in t.warnings)


@pytest.mark.parametrize("text", ["\U0001f600 q1", "q1 \u05e9\u05dc\u05d5\u05dd", "q1\x00\x1b[31m q2", "\u202e q3"])
def test_any_unicode_decodes_with_unknowns_reported(trained_translator, text):
    t = trained_translator.translate(text)
    assert t.tokens and t.tokens[-1] in trained_translator.tgt_vocab
    assert any("<unk>" in w for w in t.warnings) or all(s in trained_translator.src_vocab for s in t.src_tokens)


@pytest.mark.parametrize("text", ["", "   ", "\t\n", "\x00\x07"])
def test_empty_input_is_refused_clearly(random_translator, text):
    with pytest.raises(InputError, match="Nothing to translate"):
        random_translator.translate(text)


def test_batch_translation_equals_one_by_one(trained_translator):
    one_by_one = [trained_translator.translate(s).text for s in SENTENCES]
    assert trained_translator.translate_batch(SENTENCES, batch_size=3) == one_by_one
    assert trained_translator.translate_batch(["q1 q2", ""]) == [trained_translator.translate("q1 q2").text, ""]


def test_beam_of_one_is_greedy_and_wider_beams_score_at_least_as_well(trained_translator):
    model, tr = trained_translator.model, trained_translator
    src = pad_batch([tr.prepare_source(s)[1] for s in SENTENCES])
    greedy = greedy_batch(model, src)
    assert beam_batch(model, src, DecodeConfig(beam=1, length_penalty=0)) == greedy

    def logprob(i, ids):
        tgt = torch.tensor([[2, *ids, 3]])
        with torch.no_grad():
            logp = model(src[i:i + 1], tgt[:, :-1]).log_softmax(-1)
        return logp[0].gather(1, tgt[0, 1:, None]).sum().item()

    wide = beam_batch(model, src, DecodeConfig(beam=4, length_penalty=0))
    for i, (g, w) in enumerate(zip(greedy, wide)):
        assert logprob(i, w) >= logprob(i, g) - 1e-4


def test_beam_translation_through_the_translator(trained_translator):
    assert trained_translator.translate_batch(["q1 q2 q3"], DecodeConfig(beam=3)) == ["w3 w2 w1"]


def test_search_never_emits_pad_or_sos():
    tr = make_toy_translator(seed=3)
    with torch.no_grad():
        tr.model.out_proj.bias[1:3] = 100.0  # push <pad> and <sos> to the top
    t = tr.translate("q1 q2", DecodeConfig(max_len=5))
    assert not {"<pad>", "<sos>"} & set(t.tokens)
    assert all(tok not in ("<pad>", "<sos>") for tok, _ in t.steps[0].topk)
