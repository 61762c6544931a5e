"""The LSTM encoder-decoder with Luong attention (kind rnn-attention) behind the common decoding protocol."""

import numpy as np
import pytest
import torch

from attnviz.engine.config import DecodeConfig, ModelConfig, TrainConfig
from attnviz.engine.corpus.batching import pad_batch
from attnviz.engine.errors import ConfigError
from attnviz.engine.events import DecodeStep, EncoderPass
from attnviz.engine.kinds import check, check_training, kind_of
from attnviz.engine.loading import load_translator
from attnviz.engine.models.protocol import count_parameters
from attnviz.engine.models.rnn import RNNAttention
from attnviz.engine.training.presets import get_preset
from attnviz.engine.translator import build_model
from tests.helpers import make_toy_translator, train_toy

SCORES = ["dot", "general", "concat"]


def rnn(score: str = "general", seed: int = 0, **overrides):
    return make_toy_translator(seed, kind="rnn-attention", score=score, **overrides)


@pytest.fixture(scope="module")
def trained_rnn():
    translator = rnn("general", seed=3)
    losses = train_toy(translator, steps=1000, lr=5e-3)
    return translator, losses


def test_reference_c_size_and_init():
    cfg = ModelConfig(7853, 5893, kind="rnn-attention", d_model=256, hidden=512, enc_layers=2, dec_layers=2,
                      dropout=0.2, score="general")
    model = RNNAttention(cfg)
    lstm = 4 * 512 * (256 + 512 + 2) + 4 * 512 * (512 + 512 + 2)  # two layers, weights and both biases
    expected = 7853 * 256 + 5893 * 256 + 2 * lstm + 512 * 512 + 1024 * 512 + 512 * 5893 + 5893
    assert count_parameters(model) == expected
    assert all(p.abs().max() <= 0.1 for p in model.parameters())  # uniform init in [-0.1, 0.1]
    assert kind_of(cfg).layout(cfg) == {"cross": (1, 1)} and kind_of(cfg).attention_kinds == ("cross",)


def test_the_reference_c_preset_is_the_measured_recipe():
    """models/README.md reports test PPL 6.32 for exactly this preset: reference C's model and training settings."""
    recipe = get_preset("multi30k-de-en-lstm")
    model = build_model(recipe.model_config(7851, 5892))  # the Multi30k vocabularies (min_freq 2)
    assert count_parameters(model) == 14_683_652
    train = recipe.train
    assert (train.epochs, train.batch_size, train.lr, train.schedule, train.clip_norm, train.teacher_forcing,
            train.keep_metric) == (10, 128, 1e-3, "constant", 1.0, 0.5, "val_loss")


def test_config_refuses_mismatched_depths_and_unknown_scores():
    with pytest.raises(ConfigError, match="enc_layers == dec_layers"):
        check(ModelConfig(10, 10, kind="rnn-attention", enc_layers=2, dec_layers=1))
    with pytest.raises(ConfigError, match="score"):
        check(ModelConfig(10, 10, kind="rnn-attention", score="additive"))


@pytest.mark.parametrize("score", SCORES)
def test_alignment_rows_sum_to_one_and_ignore_padding(score):
    model = rnn(score).model.eval()
    src = pad_batch([[2, 5, 6, 7, 3], [2, 8, 3]])  # second row: two pads
    tgt = pad_batch([[2, 4, 5, 6], [2, 7, 8, 9]])
    dec = model.decode(tgt, model.encode(src), need_weights=True)
    assert dec.self_attention == [] and len(dec.cross_attention) == 1
    weights = dec.cross_attention[0]
    assert weights.shape == (2, 1, 4, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 1, 4))
    assert torch.all(weights[1, :, :, 3:] == 0)


def test_padding_does_not_change_a_sentence():
    model = rnn().model.eval()
    alone = model(pad_batch([[2, 8, 3]]), pad_batch([[2, 7, 8]]))
    padded = model(pad_batch([[2, 5, 6, 7, 3], [2, 8, 3]]), pad_batch([[2, 4, 5], [2, 7, 8]]))
    torch.testing.assert_close(padded[1], alone[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("score", SCORES)
def test_cached_decoding_equals_recomputation(score):
    translator = rnn(score)
    for text in ["q1 q2 q3", "q4 q5 q6 q7 q8"]:
        cached = list(translator.steps(text, DecodeConfig(max_len=8)))[1:]
        recomputed = list(translator.steps(text, DecodeConfig(max_len=8), recompute=True))[1:]
        assert [s.token for s in cached] == [s.token for s in recomputed]
        for a, b in zip(cached, recomputed):
            np.testing.assert_allclose(a.cross_attention, b.cross_attention, atol=1e-5)
            assert a.probability == pytest.approx(b.probability, abs=1e-5)


def test_steps_carry_one_cross_attention_map_and_no_self_attention(trained_rnn):
    translator, _ = trained_rnn
    events = list(translator.steps("q1 q2 q3"))
    first, steps = events[0], events[1:]
    assert isinstance(first, EncoderPass) and first.encoder_attention is None
    assert all(isinstance(s, DecodeStep) and s.self_attention is None for s in steps)
    assert all(s.cross_attention.shape == (1, 1, 5) for s in steps)
    t = translator.translate("q1 q2 q3")
    assert set(t.attention) == {"cross"} and t.attention["cross"].shape == (1, 1, len(t.tokens), 5)


def test_a_tiny_lstm_learns_the_reversal_and_attends_across(trained_rnn):
    translator, losses = trained_rnn
    assert np.mean(losses[-20:]) < 0.05 * np.mean(losses[:20])
    t = translator.translate("q1 q2 q3 q4")
    assert t.words == ("w4", "w3", "w2", "w1")
    cross = t.attention["cross"][0, 0]  # [T, S]; source: <sos> q1 q2 q3 q4 <eos>
    assert int(cross[0].argmax()) == 4  # the first output (w4) looks at q4


def test_batched_greedy_and_beam_agree_with_step_decoding(trained_rnn):
    translator, _ = trained_rnn
    texts = ["q1 q2 q3", "q4 q5", "q9 q8 q7 q6 q5"]
    steps = [" ".join(translator.translate(x).words) for x in texts]
    assert translator.translate_batch(texts) == steps
    assert translator.translate_batch(texts, DecodeConfig(beam=4)) == steps  # a confident model: beam agrees


def test_teacher_forcing_ratio_feeds_the_models_own_choices():
    model = rnn().model
    src, tgt = pad_batch([[2, 5, 6, 3]] * 4), pad_batch([[2, 4, 5, 6, 7]] * 4)
    model.eval()
    forced = model(src, tgt[:, :-1], teacher_forcing=1.0)
    free = model(src, tgt[:, :-1], teacher_forcing=0.0)
    torch.testing.assert_close(free[:, 0], forced[:, 0])  # the first step always reads <sos>
    assert free.shape == forced.shape and not torch.allclose(free[:, 1:], forced[:, 1:])


def test_teacher_forcing_below_one_needs_a_recurrent_model():
    with pytest.raises(ConfigError, match="feeds its own predictions \\(kind rnn-attention\\)"):
        check_training(ModelConfig(10, 10), TrainConfig(teacher_forcing=0.5))
    check_training(ModelConfig(10, 10, kind="rnn-attention"), TrainConfig(teacher_forcing=0.5))
    with pytest.raises(ConfigError, match="recurrent"):
        make_toy_translator().model(pad_batch([[2, 5, 3]]), pad_batch([[2, 4]]), teacher_forcing=0.5)


def test_checkpoint_round_trips(tmp_path, trained_rnn):
    translator, _ = trained_rnn
    path = tmp_path / "rnn.safetensors"
    translator.save(path)
    loaded = load_translator(path)
    assert loaded.config == translator.config and isinstance(loaded.model, RNNAttention)
    for a, b in zip(translator.model.state_dict().values(), loaded.model.state_dict().values()):
        torch.testing.assert_close(a, b)
    assert loaded.translate("q3 q7").tokens == translator.translate("q3 q7").tokens
    assert loaded.info["kind"] == "rnn-attention" and loaded.info["attention_kinds"] == ["cross"]


def test_tied_output_shares_the_target_embedding(tmp_path):
    translator = rnn(tie_output=True)
    model = translator.model
    assert model.out_proj.weight is model.tgt_embed.weight
    translator.save(tmp_path / "tied.safetensors")
    loaded = load_translator(tmp_path / "tied.safetensors")
    assert loaded.model.out_proj.weight is loaded.model.tgt_embed.weight
    assert loaded.translate("q1 q2").tokens == translator.translate("q1 q2").tokens
