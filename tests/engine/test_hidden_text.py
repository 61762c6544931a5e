"""Invisible characters and text that is not text (issue 30): a NUL or a zero-width space between two words keeps them
two words, the user is told what was read as a space or left out, and bytes given to the engine's API are refused
with a message that says to decode them (a TypeError and an InputError at once)."""

from __future__ import annotations

import pytest

from attnviz.engine.errors import InputError, NotTextError
from attnviz.engine.text.tokenize import TokenizerSpec, clean_text, hidden_characters


@pytest.mark.parametrize("text,clean", [
    ("Hund\x00Katze", "Hund Katze"),  # NUL: was "HundKatze", one unknown word
    ("Hund\u200bKatze", "Hund Katze"),  # zero width space
    ("Hund\x1b[31mKatze", "Hund [31mKatze"),  # ESC is a control: a break, the rest is visible text
    ("Was\u00adser", "Wasser"),  # a soft hyphen sits inside a word: left out
    ("\ufeffein\u200dHund\u200e", "einHund"),  # BOM, zero width joiner, a direction mark: left out
    ("spielen in einer \tWasserfontäne.\u200b\x07", "spielen in einer Wasserfontäne."),
])
def test_invisible_separators_break_words_and_format_characters_are_left_out(text, clean):
    assert clean_text(text) == clean


@pytest.mark.parametrize("mode", ["whitespace", "spacy"])
def test_tokenizers_see_two_words(mode):
    assert TokenizerSpec("de", mode=mode).tokenize("ein\x00Hund\u200bläuft") == ["ein", "hund", "läuft"]


def test_the_warning_names_each_hidden_character_and_what_became_of_it():
    assert hidden_characters("ein Hund.") is None and hidden_characters("ein\tHund\n") is None
    assert hidden_characters("a\x00b\u200bc\u00add\x00") == (
        "Invisible characters in the text were read as spaces between words: U+0000, U+200B ZERO WIDTH SPACE; "
        "left out: U+00AD SOFT HYPHEN.")


def test_a_translation_reads_both_words_and_says_so(trained_translator):
    plain, hidden = trained_translator.translate("q1 q2"), trained_translator.translate("q1\x00q2\u200b")
    assert hidden.src_tokens == plain.src_tokens == ("<sos>", "q1", "q2", "<eos>")
    assert hidden.text == plain.text and plain.warnings == ()
    assert hidden.warnings == ("Invisible characters in the text were read as spaces between words: U+0000, U+200B "
                               "ZERO WIDTH SPACE.",)


@pytest.mark.parametrize("call", [
    lambda t: t.generate(b"q1", n=2),
    lambda t: t.translate(b"q1 q2"),
    lambda t: list(t.steps(bytearray(b"q1"))),
    lambda t: t.translate_batch(["q1", b"q2"]),  # was a silent empty line for the bytes
], ids=["generate", "translate", "steps", "translate_batch"])
def test_bytes_are_refused_with_what_to_do(trained_translator, call):
    with pytest.raises(NotTextError, match=r"must be text \(str\), not (bytes|bytearray): decode it first, e\.g\. "
                                           r"sentence\.decode\('utf-8'\)") as caught:
        call(trained_translator)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, InputError)


def test_other_non_text_is_refused_without_the_decoding_hint(trained_translator):
    with pytest.raises(NotTextError, match=r"^The sentence must be text \(str\), not int\.$"):
        trained_translator.translate(42)
