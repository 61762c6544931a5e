"""The language guess of one token (a heuristic, engine.text.token_language): exact labels for whole words, word
pieces of SentencePiece, byte-level BPE and subword-nmt vocabularies, special tokens and bytes, other scripts, and
words two languages share."""

import pytest

from attnviz.engine.text.token_language import HEURISTIC, LANGUAGES, WORDS, marks_word_starts, token_language

WHOLE = {  # a word-level vocabulary (every token a word)
    "house": "en", "the": "en", "bicycle": "en", "Haus": "de", "Straße": "de", "über": "de", "maison": "fr",
    "été": "fr", "l'": "fr", "l’homme": "fr", "it's": "en", "c'est": "fr", "aujourd'hui": "unknown",  # "aujourd"
    "garden": "unknown", "Garten": "unknown", "jardin": "unknown",  # Latin words in no list
    "in": "unknown", "man": "unknown", "was": "unknown",  # English and German
    "a": "unknown", "on": "unknown", "me": "unknown",  # English and French
    "du": "unknown", "des": "unknown",  # German and French
    "дом": "other", "家": "other", "σπίτι": "other",  # other scripts
    ".": "unknown", "42": "unknown", "": "unknown", " ": "unknown",
    "<eos>": "unknown", "<unk>": "unknown", "<|im_end|>": "unknown", "<0xE4>": "unknown", "\\xc3": "unknown",
    "Müller-Lüdenscheid": "de", "café-crème": "fr", "Übermäßig": "de", "Bärçe": "unknown",  # both letter kinds
}
PIECES = {  # a vocabulary that marks the pieces starting a word with "▁" (SentencePiece, attnviz's byte-level labels)
    "▁house": "en", "▁Haus": "de", "▁maison": "fr", "\u0120house": "en",  # a raw GPT-2 label
    "house": "unknown",  # continues a word ("lighthouse"): the word lists are not asked
    "de": "unknown", "en": "unknown",  # "Freun|de", "Gar|ten"... not French
    "ßen": "de", "ées": "fr", "▁": "unknown", "▁,": "unknown",
    "Hau@@": "unknown", "▁Hau": "unknown", "Straß@@": "de",  # a piece whose word goes on: its letters only
}


@pytest.mark.parametrize("token, language", WHOLE.items())
def test_whole_words(token, language):
    assert token_language(token, marked=False) == language


@pytest.mark.parametrize("token, language", PIECES.items())
def test_pieces_of_a_vocabulary_that_marks_word_starts(token, language):
    assert token_language(token, marked=True) == language


def test_the_labels_lists_and_marks():
    assert LANGUAGES == ("en", "de", "fr", "other", "unknown") and "heuristic" in HEURISTIC
    assert {lang: len(words) >= 150 for lang, words in WORDS.items()} == {"en": True, "de": True, "fr": True}
    assert WORDS["en"] & WORDS["de"] == {"also", "am", "an", "hat", "in", "man", "so", "was", "will"}
    assert WORDS["en"] & WORDS["fr"] == {"a", "as", "long", "me", "on"}
    assert WORDS["de"] & WORDS["fr"] == {"des", "du", "hier"}
    assert marks_word_starts(["<unk>", "a", "▁house", "s"]) and marks_word_starts(["\u0120the"])
    assert not marks_word_starts(["<unk>", "house", "Haus", "▁"])  # a lone "▁" marks nothing
