"""ALTI and value zeroing on decoder-only LLM folders (``attribution.mixing.stream``), in float64: the block
decomposition is exact, rows are non-negative and sum to 1, keys a head cannot read score 0, grouped-query attention
gives what the same model with every key/value head repeated gives, and the methods reach the CLI."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from attnviz.cli.main import main
from attnviz.engine.attribution.base import Attribution, attribution_steps
from attnviz.engine.attribution.mixing.capture import teacher_forced_ids
from attnviz.engine.attribution.mixing.stream import block_terms, capture_stream, stream_alti
from attnviz.engine.attribution.mixing.value_zeroing import (
    StreamZeroing,
    _distances,
    stream_layer,
    stream_zeroing_steps,
    zeroing,
)
from attnviz.engine.config import DecodeConfig
from attnviz.engine.loading import load_translator
from attnviz.engine.models.causal_lm import CausalLM
from tests.llm_folder import make_llm_folder

pytest.importorskip("transformers")
SENTENCE = "Der Mann sieht den Hund."


def _translator(tmp_path_factory, family: str):
    translator = load_translator(make_llm_folder(tmp_path_factory.mktemp(family), family), "float32")
    translator.model.double()
    return translator, translator.translate(SENTENCE, DecodeConfig(max_len=4))


@pytest.fixture(scope="module", params=["llama", "gemma2", "gemma3", "mistral", "qwen3"])
def llm(request, tmp_path_factory):
    return _translator(tmp_path_factory, request.param)


def _stream(translator, translation, model=None):
    src, tgt_in = teacher_forced_ids(translator, translation.src_tokens, translation.words)
    return capture_stream(model or translator.model, src, tgt_in)


def _zeroing(cap) -> StreamZeroing:
    *_, maps = stream_zeroing_steps(cap)
    assert isinstance(maps, StreamZeroing)
    return maps


def test_the_terms_sum_to_the_blocks_output(llm):
    translator, translation = llm
    cap = _stream(translator, translation)
    assert cap.width == len(translation.src_tokens)  # the shown prompt; its last token is decoder input 0
    gemma = translator.model.arch.family == "gemma"
    for block in cap.blocks:
        terms, bias = block_terms(block)
        # Gemma's post-attention RMSNorm runs in float32 inside the model: the sum holds to its precision
        np.testing.assert_allclose((terms.sum(2) + bias).numpy(), block.out.numpy(), atol=1e-5 if gemma else 1e-12)


def test_a_block_decomposed_a_few_rows_at_a_time_gives_the_same_contributions(llm, monkeypatch):
    from attnviz.engine.attribution.mixing import stream

    translator, translation = llm
    cap = _stream(translator, translation)
    whole = stream.stream_contributions(cap)
    d = cap.blocks[0].x.size(-1)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 2 * 4 * whole.shape[-1] * d * 5)  # 5 rows a chunk
    assert len(stream.row_chunks(whole.shape[-1], d)) > 2
    np.testing.assert_allclose(stream.stream_contributions(cap), whole, atol=1e-13)  # the sums run in another order


@pytest.mark.parametrize("method", ["alti-plus", "value-zeroing"])
def test_rows_are_non_negative_and_sum_to_one(llm, method):
    translator, translation = llm
    found = list(attribution_steps(translator, method, translation.src_tokens, translation.words))[-1]
    assert isinstance(found, Attribution)
    t, s = len(translation.words), len(translation.src_tokens)
    assert found.source.shape == (3, t, s) and found.prefix.shape == (3, t, t)
    assert found.source.min() >= 0 and found.prefix.min() >= 0
    np.testing.assert_allclose(found.source.sum(-1) + found.prefix.sum(-1), 1.0, atol=1e-12)
    assert np.all(np.triu(found.prefix, k=1) == 0)  # no output token rests on a later one
    assert found.source[-1].sum() > 0 and any("one sequence" in note for note in found.notes)


def test_value_zeroing_scores_exactly_zero_where_no_head_can_read(llm):
    translator, translation = llm
    cap = _stream(translator, translation)
    maps = _zeroing(cap).maps  # [L, T, N]: the output positions' rows over the whole stream
    t, n = maps.shape[1:]
    rows, cols = np.indices((t, n))
    rows = rows + cap.width  # each row's stream position
    assert np.all(maps[:, cols > rows] == 0)  # a later position, hidden by the causal mask
    arch = translator.model.arch
    for layer in range(maps.shape[0]):
        if arch.sliding(layer):
            outside = rows - cols >= arch.sliding_window
            assert outside.any() and np.all(maps[layer][outside] == 0)
            assert np.all(maps[layer][(rows - cols < arch.sliding_window) & (cols <= rows)] > 0)


def test_value_zeroing_equals_running_the_layer_again_with_the_value_zeroed(llm):
    """The shortcut (the zeroed key's term taken off the attention output, the rest of the layer run again) gives
    what re-running the whole layer with the value vector zeroed at its probe point gives."""
    from attnviz.engine.models.probes import attention_point, edit

    translator, translation = llm
    cap, model = _stream(translator, translation), translator.model
    for layer, block in enumerate(cap.blocks):
        n = block.x.size(1)
        with torch.inference_mode(), edit(model, {attention_point("decoder", layer, "v"): zeroing(0, n)}):
            out = model.run_stream_layer(layer, block.x.expand(n + 1, -1, -1))  # row j: j's value zeroed
        rerun = _distances(out, n)[cap.width:]  # [T, N]
        np.testing.assert_allclose(stream_layer(cap, layer).numpy(), rerun.numpy(), atol=1e-9)


def _repeated(model: CausalLM) -> CausalLM:
    """The same model with each key/value head repeated for every query head it serves (no grouping)."""
    heads, groups = model.cfg.heads, model.arch.kv_heads
    cfg = dataclasses.replace(model.cfg, arch={**model.cfg.arch, "kv_heads": heads})
    twin = CausalLM(cfg).double()
    state = dict(model.state_dict())
    for name, value in model.state_dict().items():
        if ".k_proj." in name or ".v_proj." in name:  # [G * dh, ...] -> [H * dh, ...]
            state[name] = value.view(groups, -1, *value.shape[1:]).repeat_interleave(heads // groups, 0).flatten(0, 1)
    twin.load_state_dict(state)
    return twin.eval()


def test_grouped_heads_give_the_maps_of_the_same_model_with_heads_repeated(tmp_path_factory):
    translator, translation = _translator(tmp_path_factory, "llama")
    assert translator.model.arch.kv_heads < translator.model.cfg.heads
    grouped = _stream(translator, translation)
    twin = _stream(translator, translation, _repeated(translator.model))
    np.testing.assert_allclose(stream_alti(twin).total, stream_alti(grouped).total, atol=1e-10)
    np.testing.assert_allclose(_zeroing(twin).maps, _zeroing(grouped).maps, atol=1e-10)


def test_a_head_switched_off_has_no_share(tmp_path_factory):
    from attnviz.engine.models.probes import HeadScale, attention_point, edit

    translator, translation = _translator(tmp_path_factory, "qwen2")
    model = translator.model
    off = HeadScale(torch.tensor([0.0, 1.0, 1.0, 1.0], dtype=torch.float64))
    points = {attention_point(side, layer, "heads"): off for side in ("encoder", "decoder")
              for layer in range(model.cfg.dec_layers)}
    with edit(model, points):
        cap = _stream(translator, translation)
    assert all(torch.all(block.weights[:, 0] == 0) for block in cap.blocks)
    maps = stream_alti(cap).total
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-12)


@pytest.mark.parametrize("method", ["alti-plus", "value-zeroing"])
def test_cli_attribute_prints_and_exports(tmp_path, capsys, method):
    folder = make_llm_folder(tmp_path, "gemma2")
    assert main(["attribute", "-m", str(folder), "--method", method, "--target", "the dog runs", SENTENCE]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"method: {method}") and "| source: " in out and "| prefix: <sos> " in out
    path = tmp_path / "a.npz"
    assert main(["attribute", "-m", str(folder), "--method", method, "--target", "the dog runs", "--out", str(path),
                 SENTENCE]) == 0
    arrays, sidecar = np.load(path), json.loads(path.with_suffix(".json").read_text())
    t, s = len(sidecar["tokens"]), len(sidecar["src_tokens"])
    assert arrays["source"].shape == (3, t, s) and arrays["prefix"].shape == (3, t, t)
    np.testing.assert_allclose(arrays["source"].sum(-1) + arrays["prefix"].sum(-1), 1.0, atol=1e-5)
