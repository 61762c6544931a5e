"""The notebook API (``import attnviz``) on the bundled de-en model: what each result holds, that its numbers keep
the invariants the engine promises (rows sum to 1, causal masks, shares in 0..1), and the messages of bad input.
These tests import only the public API."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import attnviz
import attnviz.api

SENTENCE = "Ein Hund läuft über die Wiese."
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def model() -> attnviz.api.Model:
    return attnviz.load("de-en-multi30k")


@pytest.fixture(scope="module")
def result(model) -> attnviz.api.TranslationResult:
    return model.translate(SENTENCE)


def test_bundled_models_load_by_name_or_path(model):
    names = attnviz.bundled()
    assert names[0] == "de-en-multi30k" and "names-char" in names
    assert model.layout == {"encoder": (3, 8), "decoder": (3, 8), "cross": (3, 8)}
    assert attnviz.load(model.path).path == model.path
    assert "alti-plus" in model.methods() and "integrated-gradients" in model.methods()


def test_an_unknown_model_is_refused_with_the_bundled_names():
    with pytest.raises(attnviz.api.InputError, match="no model file, folder or bundled model called 'nope'.*"
                                                     "de-en-multi30k"):
        attnviz.load("nope")


def test_translation_holds_tokens_and_every_attention_map(result):
    assert result.text and result.tokens[-1] == "<eos>"
    assert result.src_tokens[0] == "<sos>" and "hund" in result.src_tokens
    t, s = len(result.tokens), len(result.src_tokens)
    cross = result.attention("cross", layer=-1)
    assert cross.matrix.shape == (t, s) and (cross.kind, cross.layer, cross.head) == ("cross", 2, None)
    np.testing.assert_allclose(cross.to_numpy().sum(1), 1.0, atol=1e-5)
    heads = np.stack([result.attention("cross", 2, h).to_numpy() for h in range(8)])
    np.testing.assert_allclose(heads.mean(0), cross.to_numpy(), atol=1e-6)  # None is the mean of the heads
    assert result.attention("enc", 0, 3).matrix.shape == (s, s)
    decoder = result.attention("self", 1, 0)
    future = np.triu(np.ones((t, t), dtype=bool), k=1)
    assert (decoder.masked == future).all() and np.abs(decoder.to_numpy()[future]).max() < 1e-6


def test_a_map_becomes_a_labelled_table_and_a_picture(result):
    cross = result.attention("cross", 0, 0)
    frame = cross.to_pandas()
    assert list(frame.index) == list(result.tokens) and list(frame.columns) == list(result.src_tokens)
    assert frame.to_numpy().tolist() == cross.to_numpy().tolist()
    assert cross._repr_png_().startswith(PNG)
    assert "<img src=\"data:image/png;base64," in cross._repr_html_() and "layer 0 (from 0), head 0" in cross.title


def test_bad_kinds_layers_and_heads_are_named(result):
    with pytest.raises(attnviz.api.InputError, match="no 'sideways' attention; choose one of encoder, decoder, cross"):
        result.attention("sideways")
    with pytest.raises(attnviz.api.InputError, match="layer must be a whole number from 0 to 2 .* not 3"):
        result.attention("cross", layer=3)
    with pytest.raises(attnviz.api.InputError, match="head must be a whole number from 0 to 7"):
        result.attention("cross", head=8)


def test_alti_plus_attributes_each_output_to_source_and_earlier_outputs(result):
    alti = result.attribute("alti-plus")
    t, s = len(result.tokens), len(result.src_tokens)
    assert alti.matrix.shape == (t, s + t) and alti.layer == 2 and alti.method == "alti-plus"
    assert alti.cols[:s] == result.src_tokens and alti.cols[s] == "\u2192<sos>"
    values = alti.to_numpy()
    assert values.min() >= 0
    np.testing.assert_allclose(values.sum(1), 1.0, atol=1e-4)  # ALTI+ rows are shares of the token
    assert np.abs(values[alti.masked]).max() == 0  # an output cannot rest on a decoder input after its step
    share = alti.source_share()
    assert share.shape == (t,) and ((share > 0) & (share < 1)).all()
    first = result.attribute("alti-plus", layer=0)
    assert first.layer == 0 and not np.allclose(first.to_numpy(), values)


def test_contrastive_gradients_are_signed_and_refuse_settings_they_do_not_read(result):
    foil = result.attribute("gradient-x-input", foil="cat")
    assert foil.signed and foil.result.settings["foil"] == "cat" and foil.value.startswith("log p(chosen)")
    with pytest.raises(attnviz.api.InputError, match="ALTI\\+ does not use foil"):
        result.attribute("alti-plus", foil="cat")
    with pytest.raises(attnviz.api.InputError, match="unknown attribution method 'magic'"):
        result.attribute("magic")
    with pytest.raises(attnviz.api.InputError, match="unknown attribution setting in \\['colour'\\]"):
        result.attribute("saliency", colour="red")


def test_word_alignment_links_the_words_of_both_sides(result):
    words = result.text.split()
    found = result.align()
    assert found.source_words == tuple(SENTENCE.split()) and found.target_words == tuple(words)
    assert found.method == "average of all layers and heads" and found.links
    links = found.to_numpy()
    assert links.shape == (len(words), len(SENTENCE.split())) and links.sum() == len(found.links)
    assert (links.sum(1) == 1).all()  # argmax: one source word per target word
    assert found.pharaoh() == " ".join(f"{i}-{j}" for i, j in found.links)
    assert len(found.to_pandas()) == len(found.links)
    one = result.align(layer=2, head=4, target="A dog runs .")
    assert one.method == "layer 3 head 5" and one.target_words == ("A", "dog", "runs", ".")
    with pytest.raises(attnviz.api.InputError, match="give both layer and head"):
        result.align(layer=1)


def test_head_statistics_of_a_sentence_and_of_a_corpus(model, result):
    stats = result.heads()
    rows = stats.rows()
    assert len(rows) == 3 * 3 * 8 and {r["kind"] for r in rows} == {"encoder", "decoder", "cross"}
    entropy = stats.to_numpy("cross", "norm_entropy")
    assert entropy.shape == (3, 8) and ((entropy >= 0) & (entropy <= 1)).all()
    assert np.isnan(stats.to_numpy("cross", "same")).all()  # a self-attention figure
    frame = stats.to_pandas()
    assert len(frame) == 72 and {"entropy", "sink", "tags"} <= set(frame.columns)
    assert "<table>" in stats._repr_html_()
    corpus = model.heads([SENTENCE, "Zwei Männer spielen Fußball."])
    assert len(corpus.stats.sentences) == 2 and corpus.stats.targets == "greedy"
    with pytest.raises(ValueError, match="unknown statistic 'joy'"):
        stats.to_numpy("cross", "joy")


def test_beam_search_and_heads_off(model):
    beam = model.translate(SENTENCE, beam=4)
    np.testing.assert_allclose(beam.attention().to_numpy().sum(1), 1.0, atol=1e-5)
    off = model.translate(SENTENCE, heads_off="cross:3.*")
    assert np.abs(off.attention("cross", 2, 5).to_numpy()).max() == 0  # an off head adds nothing
    with pytest.raises(attnviz.api.InputError, match="beam must be at least 1"):
        model.translate(SENTENCE, beam=0)
    with pytest.raises(attnviz.api.InputError, match="translate needs a sentence"):
        model.translate("  ")


def test_a_language_model_is_told_to_generate():
    with pytest.raises(attnviz.api.InputError, match="is a language model"):
        attnviz.load("names-char").translate("em")


def test_to_pandas_without_pandas_says_how_to_get_it(result, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="to_pandas\\(\\) needs pandas.*pip install pandas"):
        result.attention().to_pandas()
    assert result.attention().to_numpy().shape[0] == len(result.tokens)  # numpy needs nothing more


def test_results_describe_and_save_themselves(model, result, tmp_path):
    assert "de-en-multi30k" in model._repr_html_() or model.name in model._repr_html_()
    page = result._repr_html_()
    assert "Ein Hund läuft über die Wiese." in page and "<table>" in page and result.tokens[1] in page
    frame = result.to_pandas()
    assert list(frame["token"]) == list(result.tokens) and frame["probability"].between(0, 1).all()
    result.attention("decoder", 0).save(str(tmp_path / "decoder.svg"))
    assert (tmp_path / "decoder.svg").read_text().lstrip().startswith(("<?xml", "<svg"))


def test_an_imported_multilingual_folder_in_the_chosen_language(tmp_path):
    """A tiny random NLLB-shaped folder (tests/folder_samples.py): the target tag leads the output, the attention
    covers the subword pieces and the alignment the sentence's words."""
    from tests.folder_samples import write_fairseq_folder

    folder = write_fairseq_folder(tmp_path / "nllb", "nllb")
    model = attnviz.load(folder)
    result = model.translate("ein hund läuft", tgt_lang="fra_Latn", max_len=6)
    assert result.tokens[0] == "fra_Latn" and result.src_tokens[0] == "deu_Latn"
    assert any("deu_Latn" in warning for warning in result.warnings)  # the source language was guessed, and said
    assert model.translate("ein hund läuft", max_len=6).tokens[0] == "eng_Latn"  # the choice was this sentence's
    cross = result.attention("cross", head=0)
    assert cross.matrix.shape == (len(result.tokens), len(result.src_tokens))
    np.testing.assert_allclose(cross.to_numpy().sum(1), 1.0, atol=1e-5)
    found = result.align(target="le chien court")
    assert found.source_words == ("ein", "hund", "läuft") and found.to_numpy().shape == (3, 3)
