"""The decoder-only character language model (kind char-lm): generation as events, sampling, learning."""

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
from attnviz.engine.training.schedule import learning_rate
from attnviz.engine.translator import build_model
from tests.helpers import make_toy_lm, train_toy_lm


@pytest.fixture(scope="module")
def trained_lm():
    translator = make_toy_lm(seed=2)
    losses = train_toy_lm(translator, steps=400)
    return translator, losses


def test_reference_d_has_no_encoder_and_no_cross_attention():
    cfg = check(ModelConfig(31, 31, kind="char-lm", d_model=64, heads=4, enc_layers=0, dec_layers=4, ff_dim=256,
                            norm="pre", max_positions=32, dropout=0.0))
    model = build_model(cfg)
    names = [n for n, _ in model.named_parameters()]
    assert not any(n.startswith(("src_embed", "encoder")) or "cross" in n for n in names)
    per_block = 4 * (64 * 64 + 64) + 2 * (64 * 256) + 256 + 64 + 2 * 2 * 64
    assert count_parameters(model) == 31 * 64 + 32 * 64 + 4 * per_block + 2 * 64 + 64 * 31 + 31
    kind = kind_of(cfg)
    assert kind.layout(cfg) == {"decoder": (4, 4)} and not kind.has_source and model.max_source_len == 0


def test_self_attention_is_causal_and_rows_sum_to_one():
    model = make_toy_lm().model.eval()
    tgt = pad_batch([[2, 5, 6, 7, 8], [2, 9, 10]])
    dec = model.decode(tgt, model.encode(tgt[:, :0]), need_weights=True)
    assert dec.cross_attention == [] and len(dec.self_attention) == 2
    for weights in dec.self_attention:
        assert weights.shape == (2, 4, 5, 5)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 5))
        assert torch.all(weights.triu(diagonal=1) == 0)


def test_prefix_steps_are_forced_and_generation_continues(trained_lm):
    translator, _ = trained_lm
    events = list(translator.steps("cd"))
    first, steps = events[0], events[1:]
    assert isinstance(first, EncoderPass) and first.src_tokens == () and first.encoder_attention is None
    assert all(isinstance(s, DecodeStep) and s.cross_attention is None for s in steps)
    assert [s.forced for s in steps[:2]] == [True, True] and not any(s.forced for s in steps[2:])
    assert [s.token for s in steps[:2]] == ["c", "d"]
    for t, step in enumerate(steps):
        assert step.self_attention.shape == (2, 4, t + 1)
        np.testing.assert_allclose(step.self_attention.sum(-1), 1, atol=1e-5)
    assert steps[2].token == "e" and steps[-1].token == "<eos>"  # learned: letters run on
    t = translator.translate("cd")
    assert set(t.attention) == {"decoder"} and t.text.startswith("cde") and t.src_tokens == ()
    assert t.axis_labels("decoder") == (t.tokens, ("<sos>",) + t.tokens[:-1])


def test_a_tiny_language_model_learns(trained_lm):
    translator, losses = trained_lm
    assert np.mean(losses[-20:]) < 0.6 * np.mean(losses[:20])
    for first in "aceg":
        word = translator.translate(first).text
        assert all(ord(b) - ord(a) == 1 for a, b in zip(word, word[1:])), word


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_cached_generation_equals_recomputation(temperature):
    translator = make_toy_lm(seed=5)
    for prefix in ["", "ab", "fgh"]:
        cached = list(translator.steps(prefix, DecodeConfig(temperature=temperature, seed=7)))[1:]
        recomputed = list(translator.steps(prefix, DecodeConfig(temperature=temperature, seed=7), recompute=True))[1:]
        assert [s.token for s in cached] == [s.token for s in recomputed]
        for a, b in zip(cached, recomputed):
            np.testing.assert_allclose(a.self_attention, b.self_attention, atol=1e-5)


def test_sampling_is_reproducible_by_seed_and_varies_across_seeds():
    translator = make_toy_lm(seed=5)  # untrained: a flat distribution, so draws differ
    first = [t.text for t in translator.generate("", n=5, decode=DecodeConfig(temperature=1.0, seed=11))]
    again = [t.text for t in translator.generate("", n=5, decode=DecodeConfig(temperature=1.0, seed=11))]
    other = [t.text for t in translator.generate("", n=5, decode=DecodeConfig(temperature=1.0, seed=12))]
    assert first == again and first != other and len(set(first)) > 1
    greedy = {t.text for t in translator.generate("", n=3, decode=DecodeConfig(temperature=0.0))}
    assert len(greedy) == 1


def test_generation_stops_at_the_context(trained_lm):
    translator, _ = trained_lm
    steps = [e for e in translator.steps("", DecodeConfig(max_len=500, temperature=5.0, seed=3))
             if isinstance(e, DecodeStep)]
    assert len(steps) <= translator.config.max_positions


def test_prefix_problems_are_warnings_not_errors(trained_lm):
    translator, _ = trained_lm
    first = next(iter(translator.steps("ab7")))
    assert any("7" in w and "vocabulary" in w for w in first.warnings)
    first = next(iter(translator.steps("a" * 40)))
    assert any("context" in w for w in first.warnings)


def test_checkpoint_round_trips(tmp_path, trained_lm):
    translator, _ = trained_lm
    translator.save(tmp_path / "lm.safetensors")
    loaded = load_translator(tmp_path / "lm.safetensors")
    assert loaded.config == translator.config and not loaded.has_source
    assert loaded.translate("b").tokens == translator.translate("b").tokens
    assert loaded.info["kind"] == "char-lm" and "language model" in loaded.info["languages"]


def test_a_language_model_cannot_keep_bleu():
    with pytest.raises(ConfigError, match="bleu"):
        check_training(ModelConfig(10, 10, kind="char-lm", enc_layers=0), TrainConfig(keep_metric="bleu"))


def test_one_cycle_schedule_matches_torch():
    cfg = TrainConfig(lr=1e-2, schedule="one_cycle")
    total = 200
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=total, cycle_momentum=False)
    for step in range(1, total + 1):
        assert learning_rate(step, cfg, 64, total) == pytest.approx(opt.param_groups[0]["lr"], rel=1e-6, abs=1e-12)
        opt.step()
        sched.step()
