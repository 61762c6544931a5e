import pytest

from attnviz.engine.errors import ConfigError
from attnviz.engine.text.tokenize import TokenizerSpec, _spacy_tokenizer, clean_text, detokenize, normalize_tatoeba


def test_spacy_splits_punctuation_and_lowercases():
    assert TokenizerSpec("de").tokenize("Ein Hund rennt, schnell!") == ["ein", "hund", "rennt", ",", "schnell", "!"]
    assert TokenizerSpec("de", lowercase=False).tokenize("Ein Hund.") == ["Ein", "Hund", "."]


def test_english_clitics_follow_spacy():
    assert TokenizerSpec("en").tokenize("He doesn't know.") == ["he", "does", "n't", "know", "."]


def test_tokenizer_is_created_once_per_language():
    assert _spacy_tokenizer("fr") is _spacy_tokenizer("fr")


def test_odd_whitespace_and_control_characters_are_cleaned():
    assert clean_text("spielen in einer \tWasserfontäne.\u200b\x07") == "spielen in einer Wasserfontäne."
    assert TokenizerSpec("de").tokenize("a\u00a0b\u202fc") == ["a", "b", "c"]


def test_tatoeba_normalisation_matches_reference_b():
    assert normalize_tatoeba("Je pars en vacances pour quelques jours.") == "je pars en vacances pour quelques jours ."
    assert normalize_tatoeba("Ça a été\u202f!") == "ca a ete !"
    assert normalize_tatoeba("I'm 20-years old?") == "i m years old ?"
    spec = TokenizerSpec("fr", mode="whitespace", normalize="tatoeba")
    assert spec.tokenize("Il est très fatigué\u202f!") == ["il", "est", "tres", "fatigue", "!"]


def test_chars_mode_keeps_every_character():
    assert TokenizerSpec("en", mode="chars").tokenize("Anna  B") == ["a", "n", "n", "a", " ", "b"]


@pytest.mark.parametrize("kwargs", [dict(mode="bpe"), dict(normalize="nfc"), dict(lang="German")])
def test_bad_settings_are_refused_with_the_field_named(kwargs):
    settings = dict(lang="de") | kwargs
    with pytest.raises(ConfigError) as err:
        TokenizerSpec(**settings)
    assert next(iter(kwargs.values())) in str(err.value)


def test_spec_round_trips_through_dict():
    spec = TokenizerSpec("fr", mode="whitespace", lowercase=False, normalize="tatoeba")
    assert TokenizerSpec.from_dict(spec.to_dict()) == spec


def test_detokenize_attaches_punctuation_and_capitalises():
    assert detokenize(["a", "dog", "does", "n't", "run", "(", "fast", ")", "."]) == "A dog doesn't run (fast)."
    assert detokenize(["i", "m", "tired", "."], mode="whitespace") == "i m tired."
    assert detokenize(["a", "n", "n", "a"], mode="chars") == "anna"
