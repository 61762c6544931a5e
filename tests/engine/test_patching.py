"""Activation patching on tiny seeded float64 Transformers: patching a whole last layer restores the clean
log-probability exactly, patching nothing is the corrupted run, each entry is the restored fraction of its own
patched run, later decoder inputs hold 0, the corruption is read and refused as documented, a stop yields nothing
more, and a run beside another thread's translations gives the numbers it gives alone."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from attnviz.engine.attribution.base import Attribution, AttributionProgress, AttributionSettings, attribution_steps
from attnviz.engine.attribution.corruption import parse_corruption
from attnviz.engine.attribution.forced import forced_ids, next_token_logp
from attnviz.engine.attribution.patching import method as patching
from attnviz.engine.attribution.patching.corrupted import corrupted_source
from attnviz.engine.attribution.patching.runs import Patch, Site, clean_run, patched_logp
from attnviz.engine.errors import ConfigError, InputError
from attnviz.engine.models.probes import attention_point, edit
from tests.helpers import make_toy_lm, make_toy_translator

SENTENCE = "q1 q2 q3 q4"


@pytest.fixture(scope="module")
def tr():
    translator = make_toy_translator(seed=1, activation="gelu")
    translator.model.double()
    return translator


@pytest.fixture(scope="module")
def forced_run(tr):
    t = tr.translate(SENTENCE)
    return t.src_tokens, t.tokens[:8]


def _patch(tr, src_tokens, tokens, **settings) -> Attribution:
    result = list(attribution_steps(tr, "patching", src_tokens, tokens, AttributionSettings(**settings)))[-1]
    assert isinstance(result, Attribution)
    return result


def _plain_logp(model, src_ids, forced) -> torch.Tensor:
    """log p(chosen) [T] of one pass of the network's own calls, no probe block open."""
    with torch.no_grad():
        logits = model.project(model.decode(forced.tgt_in[None], model.encode(src_ids[None])).hidden)[0]
    return next_token_logp(logits)[torch.arange(forced.tgt_out.numel()), forced.tgt_out]


def _runs(tr, src_tokens, tokens, corrupt=None):
    forced = forced_ids(tr, src_tokens, tokens)
    cfg = tr.model.cfg
    points = [f"enc.{cfg.enc_layers - 1}.out", f"dec.{cfg.dec_layers - 1}.out", attention_point("cross", 0, "heads")]
    corrupted = corrupted_source(tr, src_tokens, parse_corruption(corrupt))
    return forced, clean_run(tr.model, forced, points), corrupted.ids


def test_patching_every_position_of_the_last_layers_restores_the_clean_logp(tr, forced_run):
    forced, clean, corrupt = _runs(tr, *forced_run)
    s, t = forced.src.numel(), forced.tgt_in.numel()
    cfg = tr.model.cfg
    every_src = Patch(tuple(Site(f"enc.{cfg.enc_layers - 1}.out", j) for j in range(s)))
    every_tgt = Patch(tuple(Site(f"dec.{cfg.dec_layers - 1}.out", i) for i in range(t)))
    whole = Patch((Site(f"dec.{cfg.dec_layers - 1}.out"),))
    got = patched_logp(tr.model, forced, corrupt, clean, [Patch(), every_src, every_tgt, whole])
    corrupted = _plain_logp(tr.model, corrupt, forced)
    assert (clean.logp - corrupted).abs().min() > 0.01  # the corruption matters to every token
    torch.testing.assert_close(got[0], corrupted, rtol=0, atol=1e-12)  # nothing patched: the corrupted run
    for row in got[1:]:
        torch.testing.assert_close(row, clean.logp, rtol=0, atol=1e-12)
    torch.testing.assert_close(clean.logp, _plain_logp(tr.model, forced.src, forced), rtol=0, atol=1e-12)


def test_an_empty_edit_is_the_corrupted_run(tr, forced_run):
    forced, _, corrupt = _runs(tr, *forced_run)
    with edit(tr.model, {}):
        inside = _plain_logp(tr.model, corrupt, forced)
    torch.testing.assert_close(inside, _plain_logp(tr.model, corrupt, forced), rtol=0, atol=0)


def test_each_entry_is_the_restored_fraction_of_its_own_run(tr, forced_run):
    src_tokens, tokens = forced_run
    a = _patch(tr, src_tokens, tokens)
    forced, clean, corrupt = _runs(tr, src_tokens, tokens)
    cfg = tr.model.cfg
    runs = patched_logp(tr.model, forced, corrupt, clean, [Patch((Site(f"enc.{cfg.enc_layers - 1}.out", 2),)),
                                                           Patch((Site(attention_point("cross", 0, "heads"), 1),))])
    corrupted = _plain_logp(tr.model, corrupt, forced)
    expected = ((runs - corrupted) / (clean.logp - corrupted)).numpy()
    np.testing.assert_allclose(a.source[-1, :, 2], expected[0], atol=1e-9)
    np.testing.assert_allclose(a.extras["cross_heads"][:, 0, 1], expected[1], atol=1e-9)
    np.testing.assert_allclose(a.scores, (clean.logp - corrupted).numpy(), atol=1e-12)
    np.testing.assert_allclose(a.extras["corrupt_logp"], corrupted.numpy(), atol=1e-12)
    assert a.extras["restorable"].all()


def test_maps_layout_prefix_causality_and_the_last_decoder_layer(tr, forced_run):
    src_tokens, tokens = forced_run
    a = _patch(tr, src_tokens, tokens)
    cfg, t = tr.model.cfg, len(tokens)
    assert a.layered and a.source.shape == (cfg.enc_layers, t, len(src_tokens)) and a.prefix.shape == (2, t, t)
    assert np.all(np.triu(a.prefix, 1) == 0)  # a decoder input after step t cannot matter to it
    # the last decoder layer's output at position t is all that step t's logits read
    np.testing.assert_allclose(np.diagonal(a.prefix[-1]), 1.0, atol=1e-9)
    np.testing.assert_allclose(np.tril(a.prefix[-1], -1), 0.0, atol=1e-9)
    assert {k: v.shape for k, v in a.extras.items() if k.endswith("heads")} == {
        f"{k}_heads": (t, 2, cfg.heads) for k in ("encoder", "decoder", "cross")}
    assert a.settings["corrupted_source"] == "<sos> <unk> <unk> <unk> <unk> <eos>"
    assert any("every source token but <sos>/<eos> replaced by <unk>" in n for n in a.notes)


def test_an_unchanged_corruption_leaves_nothing_to_restore(tr, forced_run):
    src_tokens, tokens = forced_run
    a = _patch(tr, src_tokens, tokens, corrupt=SENTENCE)
    assert not a.extras["restorable"].any() and not a.source.any() and not a.prefix.any()
    assert any("nothing is corrupted" in n for n in a.notes)
    assert any(n.startswith("At output step 1 (") and "nothing to restore" in n for n in a.notes)


def test_edits_by_position_and_by_token(tr, forced_run):
    src_tokens, _ = forced_run
    by_position = corrupted_source(tr, src_tokens, parse_corruption("3=q7"))
    by_token = corrupted_source(tr, src_tokens, parse_corruption("q2=q7"))
    assert by_position.tokens == by_token.tokens == ("<sos>", "q1", "q7", "q3", "q4", "<eos>")
    assert by_position.ids.tolist() == tr.src_vocab.encode(by_position.tokens)
    unknown = corrupted_source(tr, src_tokens, parse_corruption("2=Hund"))
    assert unknown.tokens[1] == "hund" and unknown.ids[1] == 0 and "reads <unk>" in unknown.notes[0]


@pytest.mark.parametrize(("corrupt", "said"), [
    ("q1 q2 q3", "reads as 5 tokens (1 <sos>, 2 q1, 3 q2, 4 q3, 5 <eos>) but the source as 6"),
    ("9=q7", "names source position 9, but the source has 6 tokens"),
    ("q9=q7", "names the source token 'q9', which the source does not hold"),
    ("2=q7q7", None),  # one whitespace token: unknown, read as <unk> (no refusal)
])
def test_refusals_name_what_was_given_and_what_to_give(tr, forced_run, corrupt, said):
    src_tokens, tokens = forced_run
    if said is None:
        assert _patch(tr, src_tokens, tokens, corrupt=corrupt).source.shape[0] == 2
        return
    with pytest.raises(InputError, match="give|name") as refused:
        _patch(tr, src_tokens, tokens, corrupt=corrupt)
    assert said in str(refused.value)


def test_settings_check_the_corruption_on_creation():
    with pytest.raises(ConfigError, match="corrupt must be"):
        AttributionSettings(corrupt="  ")
    with pytest.raises(ConfigError, match="count from 1"):
        AttributionSettings(corrupt="0=Hund")
    assert parse_corruption("a = b").sentence == "a = b" and parse_corruption("3=Hund").position == 3


def test_other_methods_and_kinds_refuse(tr, forced_run):
    src_tokens, tokens = forced_run
    with pytest.raises(InputError, match="does not use corrupt"):
        list(attribution_steps(tr, "saliency", src_tokens, tokens, AttributionSettings(corrupt="2=q7")))
    rnn = make_toy_translator(seed=0, kind="rnn-attention")
    with pytest.raises(InputError, match="not defined for .*LSTM"):
        list(attribution_steps(rnn, "patching", src_tokens, tokens))
    lm = make_toy_lm(seed=0)
    with pytest.raises(InputError, match="reads no source to corrupt"):
        list(attribution_steps(lm, "patching", (), ("a", "b")))


def test_stop_yields_nothing_more(tr, forced_run, monkeypatch):
    monkeypatch.setattr(patching, "MAX_ROWS", 4)
    stop = threading.Event()
    seen = []
    for event in attribution_steps(tr, "patching", *forced_run, stop=stop):
        seen.append(event)
        if isinstance(event, AttributionProgress) and event.done > 0:
            stop.set()
    assert len(seen) == 2 and all(isinstance(e, AttributionProgress) for e in seen)
    assert seen[-1].done == 4 and seen[-1].total > 4


def test_a_run_beside_another_threads_translations_gives_its_numbers_alone(tr, forced_run, monkeypatch):
    monkeypatch.setattr(patching, "MAX_ROWS", 8)  # many batches, so the threads interleave
    alone = _patch(tr, *forced_run, corrupt="3=q7")
    done, errors = threading.Event(), []

    def translate() -> None:
        try:
            while not done.is_set():
                tr.translate("q5 q6 q7")
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    other = threading.Thread(target=translate)
    other.start()
    try:
        beside = _patch(tr, *forced_run, corrupt="3=q7")
    finally:
        done.set()
        other.join(timeout=30)
    assert not errors
    np.testing.assert_array_equal(beside.source, alone.source)
    np.testing.assert_array_equal(beside.prefix, alone.prefix)
    np.testing.assert_array_equal(beside.extras["cross_heads"], alone.extras["cross_heads"])


def test_encoder_and_decoder_of_different_depths_align_at_the_last_layer(forced_run):
    tr = make_toy_translator(seed=3, enc_layers=3, dec_layers=1)
    tr.model.double()
    a = _patch(tr, *forced_run)
    assert a.source.shape[0] == a.prefix.shape[0] == 3
    assert not a.prefix[:2].any() and a.prefix[2].any() and a.source[0].any()
    np.testing.assert_allclose(np.diagonal(a.prefix[-1]), 1.0, atol=1e-9)
    assert any("align their last layers" in n for n in a.notes)


def test_an_imported_marian_network_restores_exactly_too():
    """Shared, tied embeddings and no <sos> on the source: the same probe points, the same exactness."""
    tr = make_toy_translator(seed=1, kind="marian")
    tr.model.double()
    t = tr.translate(SENTENCE)
    a = _patch(tr, t.src_tokens, t.tokens[:5], corrupt="2=q7")
    assert a.settings["corrupted_source"] == "q1 q7 q3 q4 <eos>"
    restorable = a.extras["restorable"].astype(bool)
    assert restorable.any()
    np.testing.assert_allclose(np.diagonal(a.prefix[-1])[restorable], 1.0, atol=1e-9)
