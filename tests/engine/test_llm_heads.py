"""Head statistics and importance of a decoder-only LLM: rows over the keys each head can see (causal, sliding
windows), output rows renormalised over the prompt, grouped-query groups reported, each head measured once."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnviz.engine.analysis.importance import kinds_to_measure
from attnviz.engine.analysis.llm_heads import kv_groups, prompt_rows, windowed_layers
from attnviz.engine.analysis.run import compute_head_stats
from attnviz.engine.analysis.stats import punctuation_table, row_statistics
from attnviz.engine.loading import load_translator
from tests.llm_folder import make_llm_folder

pytest.importorskip("transformers")
SENTENCE = "Der Mann sieht den roten Hund über die Straße laufen."


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory):  # window 6 on layers 1 and 3
    return load_translator(make_llm_folder(tmp_path_factory.mktemp("gemma3"), "gemma3"), "float32")


def _prompt(translator) -> torch.Tensor:
    return torch.tensor([translator.prepare_source(SENTENCE)[1]])


def test_windowed_layers_count_only_the_keys_they_can_see(gemma3):
    src = _prompt(gemma3)
    shown = src.size(1) - 1
    assert windowed_layers(gemma3) == [1, 3] and shown > 12
    attn = torch.zeros(1, 3, 4, shown, shown)
    _, queries, keys, seen = prompt_rows(gemma3, "encoder", attn, src, torch.zeros(1, 1, dtype=torch.long))
    keys_seen = seen[0].sum(-1)  # [L, Tq]
    q = torch.arange(shown)
    assert torch.equal(keys_seen[0], torch.minimum(q + 1, torch.tensor(6)))  # a window of 6, causal
    assert torch.equal(keys_seen[1], q + 1) and torch.equal(keys_seen[2], keys_seen[0])
    assert bool(queries.all()) and keys.shape == (1, shown)
    uniform = seen[:, :, None].float() / seen[:, :, None].float().sum(-1, keepdim=True)  # [1, L, 1, Tq, Tk]
    figures, rows = row_statistics(uniform.expand(-1, -1, 4, -1, -1), queries, keys,
                                   punctuation_table(gemma3.src_vocab), "encoder", None, seen)
    mean = figures["norm_entropy"] / rows
    # a row spread evenly over what it can see is as diffuse as it can be (the first row, one key, counts 0)
    assert torch.allclose(mean, torch.full_like(mean, (shown - 1) / shown), atol=1e-5)


def test_output_rows_are_renormalised_over_the_prompt_and_its_last_token_is_no_key(gemma3):
    src = _prompt(gemma3)
    shown = src.size(1) - 1
    tgt_in = torch.tensor([[2, 10, 11]])  # <sos> and two output tokens
    attn = torch.zeros(1, 3, 4, 3, shown)
    attn[..., -1] = 0.25  # a quarter of each row on the prompt, the rest on the output (not in these columns)
    out, queries, keys, seen = prompt_rows(gemma3, "cross", attn, src, tgt_in)
    assert torch.allclose(out[..., -1], torch.ones(1, 3, 4, 3)) and bool(queries.all())
    assert keys.shape == (1, shown) and torch.equal(keys[0], src[0, :shown])  # the lead token is not a column
    far = shown + np.arange(3)[:, None] - np.arange(shown)[None] >= 6  # the window, from the output's positions
    assert torch.equal(seen[0, 0], torch.as_tensor(~far)) and bool(seen[0, 1].all())


def test_statistics_report_groups_windows_and_what_they_are_over(gemma3):
    stats = compute_head_stats(gemma3, [SENTENCE], ["The man sees the red dog."])
    found = stats.to_json()
    assert found["kv_groups"] == [[1, 2], [3, 4]] and found["kv_heads"] == 2 and found["windowed_layers"] == [1, 3]
    assert "whole prompt" in found["prompt_note"]
    cross = [row for row in found["heads"] if row["kind"] == "cross"]
    assert len(cross) == 12 and all(row["diag_distance"] is None for row in cross)
    encoder = stats.means("encoder")["norm_entropy"]
    assert np.all((encoder > 0) & (encoder <= 1 + 1e-6))
    assert all(0 < row["max_weight"] <= 1 for row in cross)  # renormalised: a real distribution over the prompt
    assert not math.isnan(stats.means("cross")["entropy"].sum())


def test_head_importance_measures_each_llm_head_once(gemma3):
    assert kinds_to_measure(gemma3, None) == {"cross": (3, 4)}
    assert kinds_to_measure(gemma3, ["enc", "dec"]) == {"encoder": (3, 4)}
    assert kv_groups(gemma3)["kv_groups"] == [[1, 2], [3, 4]]
