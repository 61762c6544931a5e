"""Probe points (engine.models.probes): every network names them, a capture sees what passes them, an edit changes
it, blocks nest and restore, a block in one thread is invisible in another, and nobody asking for weights keeps the
fused attention path."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attnviz.engine.models import layers
from attnviz.engine.models.probes import HeadScale, ProbeError, capture, describe, edit, probe_names
from tests.helpers import make_toy_lm, make_toy_translator

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tr():
    return make_toy_translator(seed=2)


def _ids(tr, text="q1 q2 q3", out="w3 w2 w1"):
    src = torch.tensor([list(tr.prepare(text).src_ids)])
    tgt = torch.tensor([tr.tgt_vocab.encode(["<sos>", *out.split()])])
    return src, tgt


def _pass(model, src, tgt, need_weights=False):
    enc = model.encode(src, need_weights)
    dec = model.decode(tgt, enc, need_weights)
    return enc, dec, model.project(dec.hidden)


def test_every_network_lists_its_points_in_forward_order(tr):
    names = probe_names(tr.model)
    layers_ = tr.config.enc_layers
    assert names[0] == "embed.src" and names[-1] == "logits" and names[-2] == "dec.final_norm"
    assert names.index("enc.final_norm") < names.index("embed.tgt") < names.index("dec.0.in")
    for layer in range(layers_):
        for point in ("q", "k", "v", "weights", "heads", "out", "resid"):
            assert f"enc.{layer}.attn.{point}" in names
            assert f"dec.{layer}.self.{point}" in names and f"dec.{layer}.cross.{point}" in names
    assert len(set(names)) == len(names)
    lm = make_toy_lm(seed=1)
    assert not any(n.startswith(("enc.", "embed.src")) or ".cross." in n for n in probe_names(lm.model))
    rnn = make_toy_translator(seed=1, kind="rnn-attention")
    assert probe_names(rnn.model) == ("embed.src", "enc.out", "embed.tgt", "dec.0.cross.weights", "dec.0.cross.out",
                                      "logits")


def test_an_unknown_point_is_refused_naming_the_ones_offered(tr):
    with pytest.raises(ProbeError, match=r"no probe point 'enc\.9\.attn\.q'; it offers embed\.src, "
                                         r"enc\.\{0-1\}\.in, enc\.\{0-1\}\.attn\.q"):
        with capture(tr.model, ["enc.9.attn.q"]):
            pass
    with pytest.raises(ProbeError, match="no probe point 'dec.*.mlp'"):
        with edit(tr.model, {"dec.*.mlp": lambda x: x}):
            pass
    with pytest.raises(ProbeError, match="must be a function of the value"):
        with edit(tr.model, {"logits": 3}):
            pass
    assert tr.model.probes.plan() is None  # nothing left open by a refusal
    assert describe(["a", "enc.0.x", "enc.1.x", "enc.3.x"]) == "a, enc.{0-3}.x"


def test_a_capture_sees_the_values_the_network_computes_with_their_shapes(tr):
    model, (src, tgt) = tr.model, _ids(tr)
    s, t, h, d = src.size(1), tgt.size(1), tr.config.heads, tr.config.d_model
    with torch.inference_mode(), capture(model, ["enc.*.attn.weights", "dec.1.cross.*", "dec.*.out", "logits",
                                                 "embed.src", "dec.final_norm"]) as seen:
        enc, dec, logits = _pass(model, src, tgt, need_weights=True)
    for layer in range(tr.config.enc_layers):
        assert torch.equal(seen[f"enc.{layer}.attn.weights"], enc.attention[layer])
    assert seen["dec.1.cross.q"].shape == (1, h, t, d // h) and seen["dec.1.cross.k"].shape == (1, h, s, d // h)
    assert seen["dec.1.cross.weights"].shape == (1, h, t, s) and seen["dec.1.cross.heads"].shape == (1, h, t, d // h)
    assert torch.equal(seen["dec.1.cross.weights"], dec.cross_attention[1])
    assert seen["dec.1.cross.out"].shape == seen["dec.1.cross.resid"].shape == (1, t, d)
    assert torch.equal(seen["dec.final_norm"], dec.hidden) and torch.equal(seen["logits"], logits)
    embed = model.src_embed
    assert torch.equal(seen["embed.src"], embed.tokens(src) * embed.scale)
    with pytest.raises(ProbeError, match="was not captured"):
        seen.all("dec.0.self.q")


def test_a_point_passed_at_every_step_is_read_with_all(tr):
    with torch.inference_mode(), capture(tr.model, ["dec.0.self.k", "dec.0.cross.k"]) as seen:
        tr.translate("q1 q2")
        steps = len(seen.all("dec.0.self.k"))
    assert steps > 1 and all(k.size(2) == 1 for k in seen.all("dec.0.self.k"))  # a step's new position
    assert len(seen.all("dec.0.cross.k")) == 1  # once per sentence, when decoding starts
    with pytest.raises(ProbeError, match=f"passed {steps} times"):
        seen["dec.0.self.k"]


def test_an_edit_changes_what_follows_and_is_removed_after(tr):
    model, (src, tgt) = tr.model, _ids(tr)
    with torch.inference_mode():
        _, _, before = _pass(model, src, tgt)
        with edit(model, {"dec.1.out": lambda x: torch.zeros_like(x)}):
            _, dec, zeroed = _pass(model, src, tgt)
        _, _, after = _pass(model, src, tgt)
    assert torch.equal(before, after) and not torch.equal(before, zeroed)
    assert torch.allclose(zeroed, model.project(model.dec_norm(torch.zeros_like(dec.hidden))))


def test_nested_edits_compose_outermost_first_and_restore(tr):
    model, (src, tgt) = tr.model, _ids(tr)
    order = []

    def mark(tag):
        def fn(x):
            order.append(tag)
            return x * 2
        return fn

    with torch.inference_mode(), capture(model, ["dec.0.ff.out"]) as outer_seen:
        with edit(model, {"dec.0.ff.out": mark("outer")}):
            with edit(model, {"dec.0.ff.out": mark("inner")}), capture(model, ["dec.0.ff.out"]) as inner:
                _pass(model, src, tgt)
            assert model.probes.plan().wants("dec.0.ff.out")
            _pass(model, src, tgt)
        plain = capture(model, ["dec.0.ff.out"])
        with plain as alone:
            _pass(model, src, tgt)
    assert order == ["outer", "inner", "outer"]
    raw = alone["dec.0.ff.out"]
    assert torch.equal(inner["dec.0.ff.out"], raw * 4)  # both edits, then the capture
    assert torch.equal(outer_seen.all("dec.0.ff.out")[0], raw * 4) and torch.equal(outer_seen.all(
        "dec.0.ff.out")[1], raw * 2)
    assert model.probes.plan() is None


def test_blocks_in_two_threads_do_not_see_each_other(tr):
    """One thread captures while another edits the same model: each gets what it gets alone."""
    model, (src, tgt) = tr.model, _ids(tr)
    zero_heads = {"dec.*.cross.weights": HeadScale(torch.zeros(tr.config.heads))}

    def captured():
        with torch.inference_mode(), capture(model, ["dec.*.cross.weights", "enc.1.out"]) as seen:
            _, _, logits = _pass(model, src, tgt)
        return {k: seen[k] for k in seen} | {"logits": logits}

    def edited():
        with torch.inference_mode(), edit(model, zero_heads):
            return _pass(model, src, tgt)[2]

    alone_capture, alone_edit = captured(), edited()
    results, barrier = {}, threading.Barrier(2)

    def run(name, fn):
        barrier.wait(10)
        results[name] = [fn() for _ in range(20)]

    threads = [threading.Thread(target=run, args=("capture", captured)),
               threading.Thread(target=run, args=("edit", edited))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert all(torch.equal(r["logits"], alone_capture["logits"]) for r in results["capture"])
    assert all(torch.equal(r["dec.1.cross.weights"], alone_capture["dec.1.cross.weights"])
               for r in results["capture"])
    assert all(torch.equal(r, alone_edit) for r in results["edit"])
    assert not torch.equal(alone_edit, alone_capture["logits"])


def test_nobody_asking_for_weights_keeps_the_fused_path(tr, monkeypatch):
    model, (src, tgt) = tr.model, _ids(tr)
    fused = []
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(layers.F, "scaled_dot_product_attention", lambda *a, **k: fused.append(1) or real(*a, **k))
    blocks = tr.config.enc_layers + 2 * tr.config.dec_layers
    with torch.inference_mode():
        _pass(model, src, tgt)
        assert len(fused) == blocks
        fused.clear()
        with capture(model, ["dec.*.out", "enc.0.attn.v"]):  # reading other points keeps it
            _pass(model, src, tgt)
        assert len(fused) == blocks
        fused.clear()
        with edit(model, {"dec.0.cross.weights": HeadScale(torch.tensor([1.0, 0.0, 1.0, 1.0]))}):
            off = _pass(model, src, tgt)[2]
        assert len(fused) == blocks  # a head scale is applied to the heads' outputs
        fused.clear()
        with capture(model, ["dec.0.cross.weights"]), edit(model, {"dec.0.cross.weights": HeadScale(
                torch.tensor([1.0, 0.0, 1.0, 1.0]))}):
            off_explicit = _pass(model, src, tgt)[2]
        assert len(fused) == blocks - 1  # read: that block computes its weights
    assert torch.allclose(off, off_explicit, atol=1e-6)


def test_an_unused_probe_changes_no_result(tr):
    """A pass with a block open on some other point gives bit-identical logits."""
    model, (src, tgt) = tr.model, _ids(tr)
    with torch.inference_mode():
        plain = _pass(model, src, tgt, need_weights=True)
        with capture(model, ["dec.0.ff.out"]):
            probed = _pass(model, src, tgt, need_weights=True)
    assert torch.equal(plain[2], probed[2])
    assert all(torch.equal(a, b) for a, b in zip(plain[1].cross_attention, probed[1].cross_attention))


def test_a_copied_network_has_its_own_board(tr):
    import copy

    twin = copy.deepcopy(tr.model)
    assert twin.probes is not tr.model.probes and probe_names(twin) == probe_names(tr.model)
    with edit(tr.model, {"logits": lambda x: x * 0}):
        assert twin.probes.plan() is None


def test_attribution_and_analysis_use_no_forward_hooks():
    found = subprocess.run(["grep", "-rn", "register_forward", "attnviz/engine/attribution", "attnviz/engine/analysis"],
                           cwd=ROOT, capture_output=True, text=True)
    assert found.returncode == 1 and found.stdout == "", found.stdout
    assert sys.modules.get("attnviz.engine.models.probes") is not None


def test_blocks_left_out_of_order_by_two_generators_leave_the_right_one_open(tr):
    model = tr.model

    def block(name):
        with edit(model, {name: lambda x: x}):
            yield

    first, second = block("dec.0.out"), block("dec.1.out")
    next(first)
    next(second)
    next(first, None)  # the first generator leaves its block while the second's is still open
    assert model.probes.plan().wants("dec.1.out") and not model.probes.plan().wants("dec.0.out")
    next(second, None)
    assert model.probes.plan() is None


def test_a_block_closed_from_another_thread_leaves_the_thread_that_opened_it(tr):
    """A job's generator suspended inside a block and closed elsewhere (collected on the GUI thread) must not leave
    its edit in force in the thread that opened it."""
    model = tr.model

    def job():
        with edit(model, {"logits": lambda x: x * 0}):
            yield

    running = job()
    with edit(model, {"dec.0.out": lambda x: x}):  # another block stays open, so the plan is consulted
        next(running)
        assert model.probes.plan().wants("logits")
        closer = threading.Thread(target=running.close)
        closer.start()
        closer.join(10)
        assert not model.probes.plan().wants("logits") and model.probes.plan().wants("dec.0.out")
    assert model.probes.plan() is None
