"""The suspect-translation score (engine.attribution.suspect: components, corpus): each component on constructed
attention (uniform cross-attention is at Wasserstein 0 from uniform; all mass on <eos> ignores every source word),
the percentile ranks, and the corpus ranking as events with a stop check, its batched figures equal to the
one-sentence path (the calibrated verdict: test_suspect_calibration)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from attnviz.engine.attribution.base import AttributionProgress
from attnviz.engine.attribution.suspect.components import (
    COMPONENTS,
    attention_components,
    component_values,
    percentiles,
)
from attnviz.engine.attribution.suspect.corpus import suspect_sentence, suspect_steps
from attnviz.engine.attribution.suspect.rank import SuspectRanking
from attnviz.engine.errors import InputError
from tests.helpers import SRC_WORDS, make_toy_lm, make_toy_translator

SRC = ("<sos>", "Ein", "Hund", ".", "<eos>")


def test_uniform_cross_attention_is_at_distance_zero_from_uniform():
    found = attention_components(np.full((3, 5), 0.2), SRC)
    assert found["wass_to_unif"] == pytest.approx(0.0, abs=1e-15)
    assert found["attn_ign_src"] == 0.0  # each word receives 3 x 0.2 = 0.6 >= 0.2
    assert found["sink_mass"] == pytest.approx(0.6)  # <sos>, "." and <eos>


def test_all_mass_on_eos_ignores_every_source_word():
    cross = np.zeros((4, 5))
    cross[:, -1] = 1.0
    found = attention_components(cross, SRC)
    assert found["attn_ign_src"] == 1.0
    assert found["sink_mass"] == 1.0
    assert found["wass_to_unif"] == pytest.approx(0.8)  # 0.5 (4 x 0.2 + 0.8)


def test_components_and_their_directions():
    logp = np.log(np.array([0.5, 0.25]))
    found = component_values(logp, np.full((2, 5), 0.2), SRC, np.array([0.9, 0.7]))
    assert tuple(found) == COMPONENTS
    assert found["seq_logprob"] == pytest.approx(np.log(0.125))
    assert found["mean_logprob"] == pytest.approx(np.log(0.125) / 2)
    assert found["alti_source_share"] == pytest.approx(0.8)
    assert np.isnan(component_values(logp, np.full((2, 5), 0.2), SRC)["alti_source_share"])


def test_percentiles_share_tied_ranks():
    np.testing.assert_allclose(percentiles(np.array([3.0, 1.0, 2.0, 2.0, np.nan])), [1, 0, 0.5, 0.5, np.nan])
    np.testing.assert_allclose(percentiles(np.array([7.0])), [0.5])


def test_the_corpus_ranking_matches_one_sentence_at_a_time_and_stops():
    translator = make_toy_translator(5, dropout=0.0)
    sources = [" ".join(SRC_WORDS[i:i + 3]) for i in range(0, 9, 2)]
    events = list(suspect_steps(translator, sources, corpus="toy"))
    assert isinstance(events[0], AttributionProgress) and events[0].phase == "decoding"
    ranking = events[-1]
    assert isinstance(ranking, SuspectRanking) and len(ranking.rows) == len(sources)
    combined = [r.combined for r in ranking.rows if not r.flagged]  # flagged rows first, then by score
    assert combined == sorted(combined, reverse=True) and ranking.how.startswith("not calibrated")
    for row in ranking.rows:
        translation, alone = suspect_sentence(translator, row.source)
        assert row.output == translation.text
        for name in COMPONENTS:
            assert row.components[name] == pytest.approx(alone[name], abs=1e-4), name
    stop = threading.Event()
    stop.set()
    assert not any(isinstance(e, SuspectRanking) for e in suspect_steps(translator, sources, stop=stop))


def test_a_language_model_and_the_lstm():
    with pytest.raises(InputError, match="a language model has none"):
        list(suspect_steps(make_toy_lm(), ["abc"]))
    lstm = make_toy_translator(0, "rnn-attention")
    ranking = list(suspect_steps(lstm, ["q1 q2", "q3"]))[-1]
    assert all(np.isnan(r.components["alti_source_share"]) for r in ranking.rows)
    assert all(np.isfinite(r.combined) for r in ranking.rows)
    assert "ALTI+ is not defined for a LSTM" in ranking.notes[0]
