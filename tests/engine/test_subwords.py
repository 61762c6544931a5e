"""SentencePiece subwords for training: the vocabulary is learned from the training split, stored in the
checkpoint, and the trained model reads any input without <unk>; BLEU still counts words."""

from __future__ import annotations

import random

import numpy as np
import pytest

from attnviz.engine.config import DecodeConfig, TrainConfig
from attnviz.engine.corpus.reader import CorpusSpec
from attnviz.engine.errors import ConfigError
from attnviz.engine.events import EvalResult, TrainFinished
from attnviz.engine.loading import load_translator
from attnviz.engine.text.tokenize import WORD_START, TokenizerSpec, train_sentencepiece
from attnviz.engine.training.loop import train
from attnviz.engine.training.presets import Recipe, get_preset

GERMANISH = ["haus", "hund", "katze", "baum", "straße", "läuft", "springt", "schläft", "groß", "klein", "über"]


def _sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(GERMANISH) + rng.choice(["", "e", "en", "es"]) for _ in range(rng.randint(3, 8)))
            for _ in range(n)]


def test_a_learned_model_splits_words_into_pieces_and_joins_them_back():
    spec = TokenizerSpec("de", mode="sentencepiece", vocab_size=320).trained(_sentences(400))
    pieces = spec.tokenize("Der Hundes springt über die Straße")
    assert pieces[0].startswith(WORD_START) and spec.detokenize(pieces) == "Der hundes springt über die straße"
    assert spec.word_starts(pieces) == [p.startswith(WORD_START) for p in pieces]
    assert any(p.startswith("<0x") for p in spec.pieces())  # byte pieces: unseen characters are never <unk>
    assert spec.trained(["anything"]) is spec  # a spec that has its model keeps it
    assert train_sentencepiece(_sentences(400), 320, "unigram") == spec.model_proto  # deterministic


def test_a_recipe_spec_without_a_model_says_what_to_do():
    with pytest.raises(ConfigError, match="training learns one"):
        TokenizerSpec("de", mode="sentencepiece").tokenize("ein hund")
    with pytest.raises(ConfigError, match="needs room for the .* characters of the text and 256 byte pieces"):
        TokenizerSpec("de", mode="sentencepiece", vocab_size=60).trained(_sentences(50))
    with pytest.raises(ConfigError, match="subword_model must be one of"):
        TokenizerSpec("de", mode="sentencepiece", subword_model="wordpiece")


@pytest.mark.parametrize("subword_model", ["unigram", "bpe"])
def test_training_learns_stores_and_reloads_the_subword_vocabularies(tmp_path, subword_model):
    src, tgt = _sentences(300, 1), _sentences(300, 2)
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in zip(src, tgt, strict=True)), encoding="utf-8")
    corpus = CorpusSpec("files", "de", "en", paths={"train": [str(tsv)], "val": [str(tsv)]})
    sides = [TokenizerSpec(lang, mode="sentencepiece", vocab_size=320, subword_model=subword_model)
             for lang in ("de", "en")]
    recipe = Recipe("spm", "subwords", corpus, *sides, 1,
                    dict(d_model=32, ff_dim=64, heads=4, enc_layers=1, dec_layers=1, dropout=0.0, max_positions=64),
                    TrainConfig(epochs=1, batch_size=64, bleu_sentences=8))
    events = list(train(recipe, tmp_path / "m.safetensors", None))
    assert isinstance(events[-1], TrainFinished)
    assert [e for e in events if isinstance(e, EvalResult)][0].record.bleu is not None
    model = load_translator(tmp_path / "m.safetensors")
    assert model.src_spec.mode == "sentencepiece" and model.src_spec.model_proto  # travels in the file
    assert model.src_vocab.to_list()[4:] == model.src_spec.pieces()  # every piece but its <unk> (attnviz has one)
    t = model.translate("Ωmega hund ☃", DecodeConfig(max_len=5))
    assert t.warnings == ()  # nothing read as <unk>
    assert all(tok in model.src_vocab for tok in t.src_tokens)


def test_the_subword_preset_is_reference_a_with_sentencepiece_sides():
    recipe, base = get_preset("multi30k-de-en-spm"), get_preset("multi30k-de-en")
    assert recipe.src_tokenizer.mode == recipe.tgt_tokenizer.mode == "sentencepiece"
    assert recipe.src_tokenizer.vocab_size == 8000 and recipe.model == base.model and recipe.train == base.train
    assert Recipe.from_dict(recipe.to_dict()) == recipe


def test_merging_pieces_sums_keys_and_averages_queries_so_rows_stay_distributions():
    from attnviz.engine.subwords import merge_matrix, word_spans

    starts = TokenizerSpec("de", mode="whitespace").word_starts(["a", "b"])
    assert starts == [True, True] and word_spans([True, False, True, False, False]) == [(0, 2), (2, 5)]
    weights = np.array([[0.1, 0.2, 0.3, 0.4],   # queries 0-1 form word 0, query 2 word 1
                        [0.4, 0.4, 0.1, 0.1],   # keys 0 and 1-3 form the two key words
                        [0.25, 0.25, 0.25, 0.25]])
    merged = merge_matrix(weights, [(0, 2), (2, 3)], [(0, 1), (1, 4)])
    np.testing.assert_allclose(merged, [[0.25, 0.75], [0.25, 0.75]])
    np.testing.assert_allclose(merged.sum(-1), 1.0)


def test_a_translation_merges_into_words_with_labels_and_every_kind():
    from attnviz.engine.events import Translation
    from attnviz.engine.subwords import merge_translation

    spec = TokenizerSpec("de", mode="sentencepiece", vocab_size=320).trained(_sentences(400))
    src = ("\u2581hund", "e", "\u2581läuft", "<eos>")
    out = ("\u2581dog", "s", "\u2581run", "<eos>")
    rng = np.random.default_rng(0)
    attention = {"encoder": rng.dirichlet(np.ones(4), size=(2, 3, 4)),
                 "cross": rng.dirichlet(np.ones(4), size=(2, 3, 4)),
                 "decoder": np.tril(rng.random((2, 3, 4, 4))) + 0}
    attention["decoder"] /= attention["decoder"].sum(-1, keepdims=True)
    t = Translation(src, out, "dogs run", attention)
    merged = merge_translation(t, spec, spec)
    assert merged.src_tokens == ("hunde", "läuft", "<eos>") and merged.tokens == ("dogs", "run", "<eos>")
    assert merged.decoder_inputs == ("<sos>", "dogs", "run")
    assert merged.attention["cross"].shape == (2, 3, 3, 3) and merged.attention["encoder"].shape == (2, 3, 3, 3)
    for m in merged.attention.values():
        np.testing.assert_allclose(m.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(merged.attention["cross"][..., 0, 0],
                               attention["cross"][..., 0:2, 0:2].sum(-1).mean(-1), atol=1e-6)
