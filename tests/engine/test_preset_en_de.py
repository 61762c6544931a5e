"""The English->German Multi30k preset: reference A's recipe with the two sides swapped (issue 28's reverse model)."""

import pytest

from attnviz.engine.corpus.reader import load_split
from attnviz.engine.events import EvalResult, TrainFinished
from attnviz.engine.loading import load_translator
from attnviz.engine.training.loop import train
from attnviz.engine.training.presets import PRESETS, Recipe, get_preset


def test_the_en_de_preset_is_reference_a_with_the_sides_swapped():
    recipe, base = get_preset("multi30k-en-de"), get_preset("multi30k-de-en")
    assert (recipe.corpus.kind, recipe.corpus.src_lang, recipe.corpus.tgt_lang) == ("multi30k", "en", "de")
    assert recipe.corpus.test_split == base.corpus.test_split
    for side, lang in ((recipe.src_tokenizer, "en"), (recipe.tgt_tokenizer, "de")):
        assert (side.lang, side.mode, side.lowercase) == (lang, "spacy", True)  # blank spaCy, lowercased, as de-en
    # everything that is not a language is reference A's: model, training, decoding, min_freq
    assert (recipe.model, recipe.train, recipe.decode, recipe.min_freq) == (base.model, base.train, base.decode, 2)
    assert (recipe.train.epochs, recipe.train.batch_size, recipe.train.lr, recipe.train.keep_metric) == (
        10, 128, 5e-4, "val_loss")
    assert recipe.probe == "A brown dog runs after the black dog."  # reference A's sample, in the source language
    assert Recipe.from_dict(recipe.to_dict()) == recipe
    assert list(PRESETS).index("multi30k-en-de") == list(PRESETS).index("multi30k-fr-en") + 1  # listed beside its kin


@pytest.mark.data
def test_the_en_de_preset_reads_english_sources_and_german_targets(data_dir):
    pairs = load_split(get_preset("multi30k-en-de").corpus, data_dir, "train")
    assert len(pairs) == 29_000
    assert pairs[0] == ("Two young, White males are outside near many bushes.",
                        "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.")


@pytest.mark.data
def test_a_tiny_en_de_run_learns_english_to_german(data_dir, tmp_path):
    settings = {"model.d_model": "32", "model.ff_dim": "64", "model.heads": "4", "model.enc_layers": "1",
                "model.dec_layers": "1", "corpus.limit": "300", "train.batch_size": "50", "train.epochs": "1",
                "train.bleu_sentences": "10"}
    recipe = get_preset("multi30k-en-de").override(settings)
    events = list(train(recipe, tmp_path / "m.safetensors", data_dir))
    assert isinstance(events[-1], TrainFinished)
    probe = [e for e in events if isinstance(e, EvalResult)][0].probe
    assert probe is not None
    assert list(probe.src_tokens[1:-1]) == ["a", "brown", "dog", "runs", "after", "the", "black", "dog", "."]
    model = load_translator(tmp_path / "m.safetensors")
    assert (model.src_spec.lang, model.tgt_spec.lang, model.info["preset"]) == ("en", "de", "multi30k-en-de")
    # the vocabularies come from the right files: English words on the source side, German on the target side
    assert {"a", "man", "dog"} <= set(model.src_vocab.to_list()) and "mann" not in model.src_vocab
    assert {"ein", "mann", "hund"} <= set(model.tgt_vocab.to_list()) and "man" not in model.tgt_vocab
    out = model.translate("Two dogs are playing in the snow.")
    assert list(out.src_tokens[1:-1]) == ["two", "dogs", "are", "playing", "in", "the", "snow", "."]
    assert all(t in model.tgt_vocab for t in out.tokens)  # German tokens (or specials) only
