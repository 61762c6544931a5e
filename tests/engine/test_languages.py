"""A multilingual model's language tags: named by ISO 639 code or by tag, stored and read back (hostile entries
refused by name), and the stated guess of a text's language (script, frequent words, letter groups)."""

from __future__ import annotations

import gzip

import pytest

from attnviz.engine.errors import ConfigError, InputError
from attnviz.engine.text.language_codes import M2M100_CODES, MBART50_CODES, NLLB_CODES
from attnviz.engine.text.languages import Languages, guess_language, iso

NLLB = Languages(NLLB_CODES, "eng_Latn")
M2M = Languages(tuple(f"__{c}__" for c in M2M100_CODES), "__en__")
MBART = Languages(MBART50_CODES, "en_XX")


@pytest.mark.parametrize("languages, name, tag", [
    (NLLB, "de", "deu_Latn"), (NLLB, "deu", "deu_Latn"), (NLLB, "fra_Latn", "fra_Latn"), (NLLB, "EN", "eng_Latn"),
    (M2M, "de", "__de__"), (M2M, "fra", "__fr__"), (MBART, "de", "de_DE"), (MBART, "fr", "fr_XX"),
    (MBART, "en_XX", "en_XX"),
])
def test_a_language_is_named_by_iso_code_or_tag(languages, name, tag):
    assert languages.tag_for(name) == tag
    assert iso(tag) == {"deu_Latn": "de", "fra_Latn": "fr", "eng_Latn": "en"}.get(tag, iso(tag))


def test_choosing_languages_keeps_the_tags_and_auto_guesses():
    chosen = NLLB.choose(src="fr", tgt="de")
    assert (chosen.src, chosen.tgt, chosen.tags) == ("fra_Latn", "deu_Latn", NLLB.tags)
    assert chosen.choose(src="auto").src is None
    assert chosen.source_tag("Zwei Hunde spielen.") == ("fra_Latn", None)  # named: no guess
    tag, note = NLLB.source_tag("Zwei Hunde spielen im Schnee.")
    assert tag == "deu_Latn" and "guessed" in note and "--src-lang" in note
    with pytest.raises(InputError, match="has no language 'klingon'.*202 in all"):
        NLLB.choose(tgt="klingon")


def test_languages_round_trip_and_hostile_entries_are_refused():
    chosen = MBART.choose(src="de")
    assert Languages.from_dict(chosen.to_dict()) == chosen
    for bad, words in [([], "an object"), ({"tags": "de_DE", "tgt": "de_DE"}, "must be a list"),
                       ({"tags": ["de_DE"], "tgt": "xx_XX"}, "not one of the model's language tags"),
                       ({"tags": [], "tgt": "de_DE"}, "non-empty"), ({"tags": ["a"], "tgt": "a", "evil": 1}, "object"),
                       ({"tags": ["a"], "tgt": "a", "src_suffix": "yes"}, "true or false")]:
        with pytest.raises(ConfigError, match=words):
            Languages.from_dict(bad)


@pytest.mark.parametrize("text, tag", [("Два человека идут по улице.", "rus_Cyrl"), ("Δύο σκύλοι παίζουν.", "ell_Grek"),
                                       ("两只狗在雪地里玩。", "zho_Hans"), ("Deux chiens jouent.", "fra_Latn"),
                                       ("", "deu_Latn")])
def test_the_guess_reads_the_script_first(text, tag):
    assert guess_language(text, NLLB) == tag


@pytest.mark.data
def test_the_guess_names_the_language_of_nearly_every_corpus_line(data_dir):
    for lang in ("de", "fr", "en"):
        with gzip.open(data_dir / f"multi30k_val.{lang}.gz", "rt", encoding="utf-8") as f:
            lines = [line.strip() for line in f]
        right = sum(iso(guess_language(line, NLLB)) == lang for line in lines)
        assert right >= 0.98 * len(lines), (lang, right, len(lines))  # measured: de 99.4%, fr 99.6%, en 100%
