"""Activation patching of decoder-only LLM folders through the probe points, in float64: the prompt's layers
(``enc.{l}.out``, the prompt's positions), the output steps' (``dec.{l}.out``) and the heads; the default corruption
takes the sentence's span away; patching every position of a layer restores the clean output exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.engine.attribution.base import Attribution, AttributionSettings, attribution_steps
from attnviz.engine.attribution.corruption import parse_corruption
from attnviz.engine.attribution.forced import forced_ids
from attnviz.engine.attribution.patching.corrupted import corrupted_source
from attnviz.engine.attribution.patching.runs import Patch, Site, clean_run, patched_logp
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import InputError
from attnviz.engine.loading import load_translator
from attnviz.engine.models.probes import layer_point
from tests.llm_folder import make_llm_folder

pytest.importorskip("transformers")
SENTENCE = "Der Mann sieht den Hund."


@pytest.fixture(scope="module", params=["qwen2", "gemma3"])
def llm(request, tmp_path_factory):
    translator = load_translator(make_llm_folder(tmp_path_factory.mktemp(request.param), request.param), "float32")
    translator.model.double()
    return translator, translator.translate(SENTENCE, DecodeConfig(max_len=4))


def patching(translator, translation, **settings) -> Attribution:
    events = list(attribution_steps(translator, "patching", translation.src_tokens, translation.tokens,
                                    AttributionSettings(**settings), roles=translation.roles))
    assert isinstance(events[-1], Attribution)
    return events[-1]


def test_the_default_corruption_replaces_the_sentences_span_only(llm):
    translator, translation = llm
    found = corrupted_source(translator, translation.src_tokens, parse_corruption(None), translation.roles)
    a = next(i for i, r in enumerate(translation.roles) if r == "source")
    b = max(i for i, r in enumerate(translation.roles) if r == "source") + 1
    filler = found.tokens[a]
    assert found.tokens[:a] == translation.src_tokens[:a] and found.tokens[b:] == translation.src_tokens[b:]
    assert set(found.tokens[a:b]) == {filler} and not filler.startswith("<")
    assert found.ids.tolist() == translator.source_ids(found.tokens)  # the prompt's last token kept after it
    with pytest.raises(InputError, match="corrupts the sentence's span by default, which needs the prompt's roles"):
        corrupted_source(translator, translation.src_tokens, parse_corruption(None), ())


def test_patching_every_position_of_a_layer_restores_the_clean_output_exactly(llm):
    translator, translation = llm
    model = translator.model
    forced = forced_ids(translator, translation.src_tokens, translation.tokens)
    corrupt = corrupted_source(translator, translation.src_tokens, parse_corruption(None), translation.roles).ids
    s, t, layers = len(translation.src_tokens), len(translation.tokens), model.cfg.dec_layers
    points = [layer_point(side, layer, "out") for side in ("encoder", "decoder") for layer in range(layers)]
    clean = clean_run(model, forced, points)
    whole = [Patch(tuple(Site(layer_point("encoder", layer, "out"), j) for j in range(s))
                   + tuple(Site(layer_point("decoder", layer, "out"), i) for i in range(t))) for layer in range(layers)]
    patched = patched_logp(model, forced, corrupt, clean, [Patch(), *whole])
    assert torch.all((patched[0] - clean.logp).abs() > 1e-6)  # the corruption moves every step
    torch.testing.assert_close(patched[1:], clean.logp.expand(layers, -1), rtol=0, atol=1e-12)


def test_patching_maps_the_prompt_the_prefix_and_the_heads(llm):
    translator, translation = llm
    found = patching(translator, translation)
    layers, s, t = translator.model.cfg.dec_layers, len(translation.src_tokens), len(translation.tokens)
    heads = translator.model.cfg.heads
    assert found.source.shape == (layers, t, s) and found.prefix.shape == (layers, t, t)
    assert found.extras["encoder_heads"].shape == (t, layers, heads) and "cross_heads" not in found.extras
    assert found.src_roles == tuple(translation.roles)
    assert "span replaced by the folder's first ordinary token" in found.notes[1]
    np.testing.assert_allclose(found.scores, found.extras["clean_logp"] - found.extras["corrupt_logp"])
    # at the last layer no prompt position reaches an output step any more, and each step's own position is all
    restorable = found.extras["restorable"].astype(bool)
    np.testing.assert_allclose(found.source[-1], 0.0, atol=1e-9)
    np.testing.assert_allclose(np.diagonal(found.prefix[-1])[restorable], 1.0, rtol=1e-9)
    shares = found.shares()
    np.testing.assert_allclose(shares.sum(-1)[:, restorable], 1.0, rtol=1e-12)
    assert np.all(shares >= 0) and np.any(shares[0, :, 0] > 0)


def test_a_corrupted_sentence_must_give_as_many_prompt_tokens(llm):
    translator, translation = llm
    with pytest.raises(InputError, match="activation patching compares the two runs position by position"):
        patching(translator, translation, corrupt="Ein Hund.")
