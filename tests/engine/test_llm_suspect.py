"""The suspect-translation score of a decoder-only LLM's translation: Attn-ign-SRC and Wass-to-Unif on the sentence's
span of the output's attention over the prompt, renormalised; sink mass on the whole prompt; ALTI's share of the
span; the corpus ranking (batched) equal to the sentences scored one by one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.engine.attribution.base import attribution_steps
from attnviz.engine.attribution.mixing.alti import alti_maps
from attnviz.engine.attribution.mixing.capture import capture, teacher_forced_ids
from attnviz.engine.attribution.suspect.components import IGNORED, SPAN_SHORT, attention_components, prompt_span
from attnviz.engine.attribution.suspect.corpus import suspect_sentence, suspect_steps
from attnviz.engine.attribution.suspect.rank import SuspectRanking
from attnviz.engine.config import DecodeConfig
from attnviz.engine.loading import load_translator
from attnviz.engine.models.probes import attention_point, edit
from tests.llm_folder import make_llm_folder

pytest.importorskip("transformers")
SENTENCES = ("Der Mann sieht den Hund.", "Die Frau läuft schnell über die Straße.", "Ein Hund.")


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    translator = load_translator(make_llm_folder(tmp_path_factory.mktemp("qwen2"), "qwen2"), "float32")
    return translator


def test_attention_components_read_the_sentences_span_renormalised(llm):
    translation, found = suspect_sentence(llm, SENTENCES[0])
    first, last = prompt_span(translation.src_tokens, translation.roles)
    assert translation.roles[first:last] == ("source",) * (last - first) and 0 < first < last
    cross = translation.attention["cross"][-1].astype(np.float64).mean(0)  # [T, S] over the whole prompt
    inside = cross[:, first:last] / cross[:, first:last].sum(-1, keepdims=True)
    mass = inside.sum(0) / inside.shape[0]
    assert found["wass_to_unif"] == pytest.approx(0.5 * np.abs(mass - 1 / (last - first)).sum())
    words = translation.src_tokens[first:last]
    expected = attention_components(inside, words)["attn_ign_src"]
    assert found["attn_ign_src"] == pytest.approx(expected)
    assert 0 <= found["attn_ign_src"] <= 1 and (inside.sum(0) < IGNORED).any() == (found["attn_ign_src"] > 0)
    assert found["sink_mass"] == pytest.approx(attention_components(cross, translation.src_tokens)["sink_mass"])


def test_the_alti_share_counts_the_span_alone(llm):
    translation, found = suspect_sentence(llm, SENTENCES[0])
    first, last = prompt_span(translation.src_tokens, translation.roles)
    alti = list(attribution_steps(llm, "alti-plus", translation.src_tokens, translation.tokens))[-1]
    span_share = alti.source[-1, :, first:last].sum(-1)  # [T]
    assert found["alti_source_share"] == pytest.approx(span_share.mean(), rel=1e-6)
    assert 0 < found["alti_source_share"] < alti.source[-1].sum(-1).mean()  # the instruction is not counted


def test_the_source_share_falls_when_the_output_cannot_read_the_span(llm):
    """Switch off every output step's attention to the sentence's tokens (their weights zeroed in every layer):
    the output then reaches the sentence only through the prompt tokens after it, so its share falls."""
    translation = llm.translate(SENTENCES[1], DecodeConfig(max_len=6))
    first, last = prompt_span(translation.src_tokens, translation.roles)
    src, tgt_in = teacher_forced_ids(llm, translation.src_tokens, translation.words)
    lengths = (len(translation.src_tokens), len(translation.words))

    def blind(weights: torch.Tensor) -> torch.Tensor:
        out = weights.clone()
        out[..., first:last] = 0
        return out

    plain = alti_maps(capture(llm.model, src, tgt_in), lengths).span_share((first, last))
    with edit(llm.model, {attention_point("decoder", layer, "weights"): blind
                          for layer in range(llm.config.dec_layers)}):
        cut = alti_maps(capture(llm.model, src, tgt_in), lengths).span_share((first, last))
    assert np.all(cut < plain) and cut.mean() < 0.8 * plain.mean()


def test_the_corpus_ranking_gives_each_sentence_its_own_components(llm):
    *_, ranking = suspect_steps(llm, SENTENCES)
    assert isinstance(ranking, SuspectRanking) and SPAN_SHORT in ranking.notes
    for row in ranking.rows:
        _, alone = suspect_sentence(llm, row.source)
        for name, value in alone.items():
            assert row.components[name] == pytest.approx(value, rel=1e-3, abs=1e-5), name
