"""ALTI and value zeroing on decoder-only LLM folders (``attribution.mixing``: one stream), in float64: the block
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
from attnviz.engine.attribution.mixing.alti import alti_maps, block_terms, layer_contributions
from attnviz.engine.attribution.mixing.capture import STREAM, Capture, capture, teacher_forced_ids
from attnviz.engine.attribution.mixing.value_zeroing import (
    ZeroingMaps,
    layer_scores,
    value_zeroing,
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


def _stream(translator, translation, model=None) -> Capture:
    src, tgt_in = teacher_forced_ids(translator, translation.src_tokens, translation.words)
    cap = capture(model or translator.model, src, tgt_in)
    assert list(cap.blocks) == list(cap.layers) == [STREAM]  # one stream, one self-attention block per layer
    return cap


def _zeroing(cap: Capture) -> ZeroingMaps:
    maps = value_zeroing(cap)
    assert maps.stream is not None and maps.encoder is None
    return maps


def test_the_terms_sum_to_the_blocks_output(llm):
    translator, translation = llm
    cap = _stream(translator, translation)
    assert cap.width == len(translation.src_tokens)  # the shown prompt; its last token is decoder input 0
    gemma = translator.model.arch.family == "gemma"
    for block in cap.blocks[STREAM]:
        terms, bias = block_terms(block)
        # Gemma's post-attention RMSNorm runs in float32 inside the model: the sum holds to its precision
        np.testing.assert_allclose((terms.sum(2) + bias).numpy(), block.out.numpy(), atol=1e-5 if gemma else 1e-12)


def test_a_block_decomposed_a_few_rows_at_a_time_gives_the_same_contributions(llm, monkeypatch):
    from attnviz.engine.attribution.mixing import alti

    translator, translation = llm
    cap = _stream(translator, translation)
    whole = layer_contributions(cap)[STREAM]
    n, d = whole.shape[-1], cap.blocks[STREAM][0].x.size(-1)
    monkeypatch.setattr(alti, "CHUNK_BYTES", 2 * 4 * n * d * 5)  # 5 rows a chunk
    assert len(alti.row_chunks(n, n * d)) > 2
    np.testing.assert_allclose(layer_contributions(cap)[STREAM], whole, atol=1e-13)  # the sums in another order


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
    maps = _zeroing(cap).stream  # [L, T, N]: the output positions' rows over the whole stream
    assert maps is not None
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


def test_value_zeroing_in_batches_gives_what_one_batch_gives(llm, monkeypatch):
    """A long stream's re-runs are split into batches, each with its own reference row: the scores do not change."""
    from attnviz.engine.attribution.mixing import value_zeroing as vz

    translator, translation = llm
    cap = _stream(translator, translation)
    layer = cap.layers[STREAM][-1]
    whole = layer_scores(cap, layer)
    n, width = layer.x.size(1), max(translator.model.cfg.ff_dim, layer.x.size(-1))
    monkeypatch.setattr(vz, "RUN_BYTES", 4 * n * width * 4)  # 3 zeroed rows and the reference a batch
    np.testing.assert_allclose(layer_scores(cap, layer).numpy(), whole.numpy(), atol=1e-12)


def test_value_zeroing_scores_the_cosine_distance_of_the_layer_rerun_with_one_value_zeroed(llm):
    """Each score is the cosine distance between a position's output of the layer run alone and its output with
    one position's value vector zeroed at its probe point, one run at a time (nothing batched)."""
    from attnviz.engine.models.probes import attention_point, edit

    translator, translation = llm
    cap, model = _stream(translator, translation), translator.model
    layer = cap.layers[STREAM][0]
    x, n = layer.x, layer.x.size(1)
    with torch.inference_mode():
        reference = model.run_layer("decoder", 0, x)[0]
        torch.testing.assert_close(reference, layer.out[0], atol=1e-12, rtol=0)  # as in the whole pass
        rows = slice(cap.width, None)
        torch.testing.assert_close(model.run_layer("decoder", 0, x, rows=rows)[0], reference[rows], atol=1e-12,
                                   rtol=0)  # the output rows alone, computed without the prompt's
        for j in (0, n // 2, n - 1):
            with edit(model, {attention_point("decoder", 0, "v"): zeroing(0, 1, j)}):
                zeroed = model.run_layer("decoder", 0, x)[0]
            expected = (1 - torch.nn.functional.cosine_similarity(zeroed, reference, dim=-1)).clamp(min=0)
            expected[: j] = 0  # earlier positions cannot read j
            np.testing.assert_allclose(layer_scores(cap, layer)[:, j].numpy(), expected[rows].numpy(), atol=1e-12)


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
    np.testing.assert_allclose(alti_maps(twin).total, alti_maps(grouped).total, atol=1e-10)
    np.testing.assert_allclose(_zeroing(twin).stream, _zeroing(grouped).stream, atol=1e-10)


def test_a_head_switched_off_has_no_share(tmp_path_factory):
    from attnviz.engine.models.probes import HeadScale, attention_point, edit

    translator, translation = _translator(tmp_path_factory, "qwen2")
    model = translator.model
    off = HeadScale(torch.tensor([0.0, 1.0, 1.0, 1.0], dtype=torch.float64))
    points = {attention_point(side, layer, "heads"): off for side in ("encoder", "decoder")
              for layer in range(model.cfg.dec_layers)}
    with edit(model, points):
        cap = _stream(translator, translation)
    assert all(torch.all(block.weights[:, 0] == 0) for block in cap.blocks[STREAM])
    maps = alti_maps(cap).total
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
