"""Switching attention heads off (engine.search.head_mask) through DecodeConfig.heads_off, in every search."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import ConfigError, InputError
from attnviz.engine.events import DecodeStep
from attnviz.engine.heads import HeadRef, format_heads, gate_values, parse_heads
from attnviz.engine.search.head_mask import heads_off
from tests.helpers import make_toy_lm, make_toy_translator, train_toy

TEXT = "q1 q2 q3 q4"
LAYOUT = {"encoder": (2, 4), "decoder": (2, 4), "cross": (2, 4)}


@pytest.fixture(scope="module")
def trained():
    translator = make_toy_translator(seed=3)
    train_toy(translator, steps=200)
    return translator


def off(text: str, layout=LAYOUT, **extra) -> DecodeConfig:
    return DecodeConfig(heads_off=parse_heads(text, layout), **extra)


def test_heads_are_parsed_one_based_and_written_back():
    refs = parse_heads("cross:2.1, cross:2.4,enc:1.*,self:2.2", LAYOUT)
    assert refs == (HeadRef("cross", 1, 0), HeadRef("cross", 1, 3), HeadRef("decoder", 1, 1),
                    *(HeadRef("encoder", 0, h) for h in range(4)))
    assert format_heads(refs, LAYOUT) == "cross:2.1,cross:2.4,dec:2.2,enc:1.*"
    assert parse_heads(format_heads(refs), LAYOUT) == refs and parse_heads("", LAYOUT) == ()


@pytest.mark.parametrize("text, message", [
    ("cross:3.1", "has layers 1-2"), ("cross:1.5", "has heads 1-4"), ("cross:0.1", "has layers 1-2"),
    ("cross 1.1", "write KIND:LAYER.HEAD"), ("ffn:1.1", "write KIND:LAYER.HEAD"),
])
def test_bad_heads_are_refused_with_what_to_write(text, message):
    with pytest.raises(InputError, match=message):
        parse_heads(text, LAYOUT)


def test_a_kind_the_model_lacks_is_named():
    with pytest.raises(InputError, match="no cross attention; it has decoder"):
        parse_heads("cross:1.1", {"decoder": (2, 4)})
    with pytest.raises(ConfigError, match="heads_off"):
        DecodeConfig(heads_off=[("cross", -1, 0)])


def test_rescaling_multiplies_the_remaining_heads():
    gates = gate_values(parse_heads("cross:1.2,cross:1.3,enc:2.*", LAYOUT), LAYOUT, rescale=True)
    assert gates == {("cross", 0): [2.0, 0.0, 0.0, 2.0], ("encoder", 1): [0.0] * 4}
    assert gate_values(parse_heads("cross:1.2", LAYOUT), LAYOUT, rescale=False) == {("cross", 0): [1, 0, 1, 1]}


def test_switching_no_head_off_changes_nothing_and_the_gates_are_removed_after(trained):
    before = trained.translate(TEXT)
    with heads_off(trained.model, parse_heads("cross:1.1,enc:2.3", LAYOUT)):
        assert trained.model.probes.plan().wants("dec.0.cross.weights")
    assert trained.model.probes.plan() is None
    after = trained.translate(TEXT, off(""))
    assert after.tokens == before.tokens and after.probabilities == before.probabilities
    for kind in before.attention:
        assert np.array_equal(before.attention[kind], after.attention[kind])


def test_an_off_head_is_zero_and_every_other_head_below_and_beside_is_bit_identical(trained):
    before = trained.translate(TEXT)
    masked = trained.translate(TEXT, off("enc:2.3"))
    enc_a, enc_b = before.attention["encoder"], masked.attention["encoder"]
    assert np.array_equal(enc_a[0], enc_b[0])  # the layer below
    assert not enc_b[1, 2].any()  # the head itself
    assert np.array_equal(np.delete(enc_a[1], 2, axis=0), np.delete(enc_b[1], 2, axis=0))  # its neighbours
    first_cross = trained.translate(TEXT, off("cross:2.2")).attention["cross"]
    assert not first_cross[1, 1].any() and np.array_equal(first_cross[0][:, 0], before.attention["cross"][0][:, 0])


def test_rescaled_heads_keep_their_weights_a_distribution_and_change_the_output(trained):
    """--rescale-heads multiplies the other heads' outputs, not their weights: the maps stay rows summing to 1."""
    before = trained.translate(TEXT)
    plain, rescaled = trained.translate(TEXT, off("enc:1.2")), trained.translate(TEXT, off("enc:1.2",
                                                                                             rescale_heads=True))
    layer = rescaled.attention["encoder"][0]  # [H, S, S] of the layer with the head off
    assert not layer[1].any()
    np.testing.assert_allclose(np.delete(layer, 1, axis=0).sum(-1), 1.0, rtol=1e-5)
    assert np.array_equal(np.delete(layer, 1, axis=0), np.delete(before.attention["encoder"][0], 1, axis=0))
    assert not np.array_equal(rescaled.attention["encoder"][1], plain.attention["encoder"][1])  # the next layer


def test_without_cross_attention_the_output_no_longer_depends_on_the_source(trained):
    everything = off("cross:1.*,cross:2.*")
    forced = trained.target_ids("w1 w2 w3")

    def probabilities(text, decode):
        steps = [e for e in trained.steps(text, decode, forced=forced) if isinstance(e, DecodeStep)]
        return [s.probability for s in steps[:3]], [s.topk for s in steps[:3]]

    assert probabilities(TEXT, everything) == probabilities("q9 q0", everything)
    assert probabilities(TEXT, DecodeConfig()) != probabilities("q9 q0", DecodeConfig())


def test_batched_greedy_and_beam_switch_the_same_heads_off(trained):
    decode = off("cross:2.1,cross:2.2,cross:2.3")
    step_by_step = trained.translate(TEXT, decode).words
    assert trained.translate_batch_tokens([TEXT], decode)[0] == list(step_by_step)
    assert trained.translate_batch_tokens([TEXT], decode)[0] != trained.translate_batch_tokens([TEXT])[0]
    beam = decode.replace(beam=3)
    events = list(trained.beam_steps(TEXT, beam))
    best = events[-1].ranking[0]
    nodes = {n.id: n for e in events[1:-1] for n in e.nodes}
    path = []
    while best != -1:
        path.insert(0, nodes[best].step.token)
        best = nodes[best].parent
    assert [t for t in path if t != "<eos>"] == trained.translate_batch_tokens([TEXT], beam)[0]


def test_the_lstm_head_and_a_language_model_head_switch_off():
    rnn = make_toy_translator(seed=1, kind="rnn-attention")
    masked = rnn.translate(TEXT, off("cross:1.1", {"cross": (1, 1)}))
    assert not masked.attention["cross"].any()
    lm = make_toy_lm(seed=1)
    layout = lm.kind.layout(lm.config)
    plain, masked = lm.translate("abc"), lm.translate("abc", off("dec:1.*", layout))
    assert not masked.attention["decoder"][0].any() and plain.probabilities != masked.probabilities
    with pytest.raises(InputError, match="no cross attention"):
        lm.translate("abc", DecodeConfig(heads_off=[("cross", 0, 0)]))


def test_the_model_is_unchanged_when_decoding_fails_midway(trained):
    with pytest.raises(RuntimeError), heads_off(trained.model, parse_heads("cross:1.1", LAYOUT)):
        raise RuntimeError("interrupted")
    assert trained.model.probes.plan() is None


def test_heads_are_off_only_in_the_thread_that_switched_them_off(trained):
    import threading

    plain = trained.translate(TEXT)
    masked = trained.translate(TEXT, off("cross:2.*"))
    assert masked.tokens != plain.tokens or masked.probabilities != plain.probabilities
    inside, results = threading.Event(), {}

    def other_thread():
        inside.wait(10)
        results["other"] = trained.translate(TEXT)  # while the main thread holds every layer-2 cross head off

    worker = threading.Thread(target=other_thread)
    worker.start()
    with heads_off(trained.model, parse_heads("cross:2.*", LAYOUT)):
        inside.set()
        worker.join(30)
        results["here"] = trained.translate(TEXT)  # this thread's gates hold (no config needed)
    assert results["other"].probabilities == plain.probabilities
    assert results["here"].probabilities == masked.probabilities
