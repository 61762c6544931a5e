"""The logit lens with languages: on decoder-only LLM folders in float64, the last layer's lens is the model's own
next-token distribution and every cell's language is the guess of its top token; over a corpus, each layer's shares
sum to 1 and the counts to the counted steps, a stop keeps what was read, a sentence too long is left out with why;
on ATTNVIZ_DATA's Multi30k test set, the bundled German->English model's last layers predict English words."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from attnviz.engine.attribution.base import AttributionProgress
from attnviz.engine.attribution.forced import forced_ids, next_token_logp
from attnviz.engine.attribution.lens_languages import LensLanguages, lens_language_steps
from attnviz.engine.attribution.logit_lens import MAX_TOP, LogitLens, logit_lens_steps
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import InputError
from attnviz.engine.loading import load_translator
from attnviz.engine.text.token_language import LANGUAGES, marks_word_starts, token_language
from tests.helpers import make_toy_translator

MODELS = Path(__file__).resolve().parents[2] / "models"
SENTENCES = ["Der Mann sieht den Hund.", "Eine Frau läuft schnell über die Straße.", "Das Haus ist rot."]


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def llm(request, tmp_path_factory):
    from tests.llm_folder import make_llm_folder  # transformers: the test-only extra

    translator = load_translator(make_llm_folder(tmp_path_factory.mktemp(request.param), request.param), "float32")
    translator.model.double()
    translator.use_languages("de", "fr")
    return translator


def test_the_last_layers_lens_is_the_llms_own_distribution(llm):
    translation = llm.translate(SENTENCES[0], DecodeConfig(max_len=6))
    lens = list(logit_lens_steps(llm, translation.src_tokens, translation.tokens, top_k=MAX_TOP))[-1]
    assert isinstance(lens, LogitLens) and lens.layers == llm.config.dec_layers
    forced = forced_ids(llm, translation.src_tokens, translation.tokens)
    with torch.no_grad():
        hidden = llm.model.decode(forced.tgt_in[None], llm.model.encode(forced.src[None])).hidden
        probs = next_token_logp(llm.model.project(hidden)[0]).exp()  # [T, V]: what decoding samples from
    top = probs.topk(MAX_TOP, -1)
    np.testing.assert_allclose(lens.top_probs[-1], top.values.numpy(), rtol=1e-12, atol=1e-15)
    labels = [[llm.tgt_vocab.token(int(i)).rstrip("\x00") for i in row] for row in top.indices]  # numpy's str
    assert lens.top_tokens[-1].tolist() == labels  # arrays drop a label's trailing NUL (the byte token "\x00")
    chosen = probs[torch.arange(len(translation.tokens)), forced.tgt_out].numpy()
    np.testing.assert_allclose(lens.chosen_prob[-1], chosen, rtol=1e-12)
    np.testing.assert_allclose(lens.chosen_prob[-1], translation.probabilities, rtol=1e-6)
    assert np.all(lens.chosen_rank[-1] == 1)  # greedy: the last layer's top token is the one chosen
    marked = marks_word_starts(llm.tgt_vocab.to_list())
    assert marked  # byte-level BPE labels: "▁the" starts a word
    assert lens.top_language.tolist() == [[token_language(t, marked) for t in row] for row in lens.top_tokens[:, :, 0]]


def test_corpus_shares_sum_to_one_per_layer(llm):
    events = list(lens_language_steps(llm, SENTENCES, DecodeConfig(max_len=5), {"corpus": "three"}))
    assert [(e.done, e.total, e.unit) for e in events[:-1]] == [(1, 3, "sentences"), (2, 3, "sentences"),
                                                               (3, 3, "sentences")]
    assert all(isinstance(e, AttributionProgress) for e in events[:-1])
    result = events[-1]
    assert isinstance(result, LensLanguages) and result.sentences == 3 and not result.stopped
    lenses = []
    for sentence in SENTENCES:  # the counts are those of each sentence's own lens
        t = llm.translate(sentence, DecodeConfig(max_len=5))
        lenses.append(list(logit_lens_steps(llm, t.src_tokens, t.tokens, top_k=1))[-1])
    assert result.steps == sum(int(lens.counted_steps().sum()) for lens in lenses) > 0
    np.testing.assert_array_equal(result.counts, sum(lens.language_counts() for lens in lenses))
    assert result.counts.shape == (llm.config.dec_layers, len(LANGUAGES))
    assert np.all(result.counts.sum(1) == result.steps)
    np.testing.assert_allclose(result.shares().sum(1), 1.0, rtol=1e-12)
    table = result.table()
    assert [row["layer"] for row in table] == list(range(1, result.layers + 1))
    assert all(abs(sum(row[lang] for lang in LANGUAGES) - 1) < 1e-12 for row in table)
    lines = result.csv_text().splitlines()
    assert lines[0] == ("layer,share_en,share_de,share_fr,share_other,share_unknown,count_en,count_de,count_fr,"
                        "count_other,count_unknown") and len(lines) == result.layers + 1
    assert [int(c) for c in lines[1].split(",")[6:]] == result.counts[0].tolist()
    data = result.to_json()
    assert data["settings"] == {"corpus": "three"} and "heuristic" in data["language_guess"]
    assert data["layers"][0]["counts"] == result.counts[0].tolist()


def test_a_stop_keeps_what_was_read_and_a_long_sentence_is_left_out():
    tr = make_toy_translator(seed=2)
    stop = threading.Event()
    seen = []
    for event in lens_language_steps(tr, ["q1 q2", "q3 q1", "q2 q2"], stop=stop):
        seen.append(event)
        if isinstance(event, AttributionProgress) and event.done == 1:
            stop.set()
    result = seen[-1]
    assert isinstance(result, LensLanguages) and result.stopped and result.sentences == 1
    assert result.counts.sum(1).tolist() == [result.steps] * tr.config.dec_layers
    too_long = " ".join(["q1"] * (tr.model.max_source_len + 5))
    result = list(lens_language_steps(tr, ["q1 q2", too_long]))[-1]
    assert result.sentences == 1 and len(result.skipped) == 1 and result.skipped[0].startswith("line 2: ")
    with pytest.raises(InputError, match="The corpus has no sentences"):
        list(lens_language_steps(tr, []))
    rnn = make_toy_translator(kind="rnn-attention")
    with pytest.raises(InputError, match="The logit lens is not defined for a .*: its network offers no read_out"):
        list(lens_language_steps(rnn, ["q1"]))


@pytest.mark.skipif(not os.environ.get("ATTNVIZ_DATA"), reason="needs ATTNVIZ_DATA (the Multi30k test set)")
def test_a_german_english_model_ends_in_english_on_multi30k():
    from attnviz.engine.corpus.reader import read_lines

    path = Path(os.environ["ATTNVIZ_DATA"]) / "multi30k_test_2016_flickr.de.gz"
    if not path.exists():
        pytest.skip(f"{path} is missing")
    sentences = read_lines(path)[:25]
    result = list(lens_language_steps(load_translator(MODELS / "de-en-multi30k.safetensors"), sentences))[-1]
    shares = dict(zip(LANGUAGES, result.shares()[-1], strict=True))
    assert result.sentences == 25 and result.steps > 200
    assert shares["en"] > 0.4 and shares["de"] < 0.05 and shares["fr"] < 0.05 and shares["other"] == 0
