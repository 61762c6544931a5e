"""Attribution on a decoder-only LLM folder's prompt: the gradient methods and the logit lens run over the prompt
(the source) and the output prefix (ALTI and value zeroing: ``test_llm_mixing``; patching: ``test_llm_patching``;
gradients against transformers: ``test_llm_gradient_parity``)."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine.attribution.base import Attribution, attribution_steps
from attnviz.engine.attribution.logit_lens import LogitLens, logit_lens_steps
from attnviz.engine.config import DecodeConfig
from attnviz.engine.loading import load_translator
from tests.llm_folder import make_llm_folder

pytest.importorskip("transformers")
SENTENCE = "Der Mann sieht den Hund."


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    translator = load_translator(make_llm_folder(tmp_path_factory.mktemp("llm"), "llama"), "float32")
    return translator, translator.translate(SENTENCE, DecodeConfig(max_len=4))


def result(translator, translation, method):
    events = list(attribution_steps(translator, method, translation.src_tokens, translation.words))
    assert isinstance(events[-1], Attribution)
    return events[-1]


@pytest.mark.parametrize("method", ["saliency", "gradient-x-input", "integrated-gradients"])
def test_gradient_methods_attribute_over_the_prompt_and_the_prefix(llm, method):
    translator, translation = llm
    found = result(translator, translation, method)
    t, s = len(translation.words), len(translation.src_tokens)
    assert found.source.shape[1:] == (t, s) and found.prefix.shape[1:] == (t, t)
    assert np.isfinite(found.source).all() and np.abs(found.source).sum() > 0
    assert np.all(np.triu(found.prefix[-1], k=1) == 0)  # no output token depends on a later one


def test_the_last_layers_lens_is_the_models_own_distribution(llm):
    translator, translation = llm
    lens = list(logit_lens_steps(translator, translation.src_tokens, translation.words))[-1]
    assert isinstance(lens, LogitLens) and lens.chosen_prob.shape == (translator.config.dec_layers,
                                                                         len(translation.words))
    np.testing.assert_allclose(lens.chosen_prob[-1], translation.probabilities[:len(translation.words)], rtol=1e-4)
