"""The suspect-translation score (engine.attribution.suspect, suspect_corpus): each component on constructed
attention (uniform cross-attention is at Wasserstein 0 from uniform; all mass on <eos> ignores every source word),
the rank-average combination, and the corpus ranking as events with a stop check, its batched figures equal to the
one-sentence path."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from attnviz.engine.attribution.base import AttributionProgress
from attnviz.engine.attribution.suspect import (
    COMPONENTS,
    SuspectRanking,
    SuspectRow,
    attention_components,
    combine,
    component_values,
    percentiles,
)
from attnviz.engine.attribution.suspect_corpus import suspect_sentence, suspect_steps
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


def test_percentiles_share_tied_ranks_and_combine_averages_them():
    np.testing.assert_allclose(percentiles(np.array([3.0, 1.0, 2.0, 2.0, np.nan])), [1, 0, 0.5, 0.5, np.nan])
    good = dict(mean_logprob=-0.1, attn_ign_src=0.0, sink_mass=0.1, wass_to_unif=0.1, alti_source_share=0.9,
                seq_logprob=-1.0)
    bad = dict(mean_logprob=-2.0, attn_ign_src=0.8, sink_mass=0.9, wass_to_unif=0.7, alti_source_share=0.3,
               seq_logprob=-0.5)
    mixed = good | {"attn_ign_src": 0.9, "alti_source_share": float("nan")}  # ranked on the components it has
    # suspicion percentiles: good (.25, 0, .25, .25, 0), bad (1, .5, 1, 1, 1), mixed (.25, 1, .25, .25, -)
    np.testing.assert_allclose(combine([good, bad, mixed]), [0.15, 0.9, 0.4375])
    ranking = SuspectRanking.of([SuspectRow(1, "a", "A", good), SuspectRow(2, "b", "B", bad)], "test")
    assert [r.line for r in ranking.rows] == [2, 1]
    assert ranking.records()[0]["rank"] == 1 and ranking.records()[0]["combined"] == 1.0


def test_the_corpus_ranking_matches_one_sentence_at_a_time_and_stops():
    translator = make_toy_translator(5, dropout=0.0)
    sources = [" ".join(SRC_WORDS[i:i + 3]) for i in range(0, 9, 2)]
    events = list(suspect_steps(translator, sources, corpus="toy"))
    assert isinstance(events[0], AttributionProgress) and events[0].phase == "decoding"
    ranking = events[-1]
    assert isinstance(ranking, SuspectRanking) and len(ranking.rows) == len(sources)
    combined = [r.combined for r in ranking.rows]
    assert combined == sorted(combined, reverse=True)
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
