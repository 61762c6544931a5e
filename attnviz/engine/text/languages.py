"""The language tokens of a multilingual translation model (NLLB-200, M2M100, mBART-50): which tokens name languages,
which one tells the encoder the source language, which one is forced as the first output token, and a stated guess
of a text's language when the user names none.

A ``Languages`` travels in a checkpoint's metadata (``languages``), so a converted model keeps its tags. Tags are
vocabulary entries in the model's own spelling (``deu_Latn``, ``__de__``, ``de_DE``); people name a language by its
ISO 639 code (``de``, ``deu``) or by the tag itself (``tag_for``). The source tag leads the source (``[src] pieces
</s>``), or follows it (``pieces </s> [src]``: NLLB's legacy order, ``src_suffix``).

The guess (``guess_language``) is deliberately simple and says so: the script most of the letters are written in
picks the language for non-Latin scripts (Cyrillic -> Russian, Greek, Arabic, Hebrew, Han -> Chinese, kana ->
Japanese, Hangul -> Korean, Devanagari -> Hindi, Thai); Latin text is scored by how many of its words are among the
most frequent words of German, French, English, Spanish, Italian, Dutch and Portuguese (2 points each), the letters
only one of them uses (ä ö ü ß for German, ç è ê œ for French, ñ for Spanish: 2 points each) and letter groups each
writes often ("sch", "eux", "th"...: 1 point each); the best score wins, German on a tie.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Any

from attnviz.engine.errors import ConfigError, InputError

# ISO 639-3 (NLLB's tags begin with it) -> 639-1, for the languages people most often name by two letters
ISO_639_1 = {"deu": "de", "fra": "fr", "eng": "en", "spa": "es", "ita": "it", "por": "pt", "nld": "nl", "rus": "ru",
             "zho": "zh", "jpn": "ja", "arb": "ar", "pol": "pl", "ces": "cs", "ukr": "uk", "tur": "tr", "kor": "ko",
             "ell": "el", "swe": "sv", "ron": "ro", "hin": "hi", "heb": "he", "tha": "th", "vie": "vi", "fin": "fi",
             "dan": "da", "hun": "hu", "bul": "bg", "cat": "ca", "ind": "id"}
_SCRIPTS = {"CYRILLIC": "ru", "GREEK": "el", "ARABIC": "ar", "HEBREW": "he", "CJK": "zh", "HIRAGANA": "ja",
            "KATAKANA": "ja", "HANGUL": "ko", "DEVANAGARI": "hi", "THAI": "th"}
_FREQUENT = {  # the most frequent words of each Latin-script language the guess knows, in its order of preference
    "de": "der die das und ist nicht ein eine zu mit auf den im ich sie es sich dem von für auch wir",
    "fr": "le la les et est un une des du de en que qui dans pour pas sur au il elle nous vous avec ce",
    "en": "the and is a an of to in that it with for on are was this be at by you he she we they",
    "es": "el la los las y es un una de que en por para con no se su al lo como",
    "it": "il lo la gli le e è un una di che in per con non si del della sono",
    "nl": "de het een en is van dat in op te met voor niet zijn er ook",
    "pt": "o a os as e é um uma de que em para com não se do da no na",
}
_LETTERS = {"de": "äöüß", "fr": "çèêœàâîûë", "es": "ñ¿¡"}
_GROUPS = {"de": ("sch", "ei", "tz", "ung", "cht", "ich"), "fr": ("eux", "aux", "eau", "ou", "qu", "oi"),
           "en": ("th", "ing", "wh", "ow", "ee"), "es": ("ción", "ll"), "it": ("zione", "gli", "cc"),
           "nl": ("ij", "oe", "aa"), "pt": ("ção", "ão", "nh")}  # letter groups each language writes often
_WORDS = re.compile(r"\w+")


def iso(tag: str) -> str:
    """A tag's ISO 639 code: ``deu_Latn`` -> ``de``, ``__de__`` -> ``de``, ``de_DE`` -> ``de``, ``ast_Latn`` ->
    ``ast`` (two letters where the common ones have them, else three)."""
    code = tag.strip("_").split("_")[0].lower()
    return ISO_639_1.get(code, code)


@dataclass(frozen=True)
class Languages:
    """A multilingual model's language tokens and the pair chosen now; ``src`` None: guessed from each text."""

    tags: tuple[str, ...]  # every language token of the model's vocabulary, in its order
    tgt: str  # the tag forced as the first output token
    src: str | None = None  # the tag the source is marked with; None: guessed from the text (``guess_language``)
    src_suffix: bool = False  # the source tag after ``</s>`` (NLLB's legacy order) instead of before the pieces

    def __post_init__(self) -> None:
        if not self.tags or any(not isinstance(t, str) or not t for t in self.tags):
            raise ConfigError("languages: tags must be a non-empty list of language tokens")
        for name, tag in (("tgt", self.tgt), ("src", self.src)):
            if tag is not None and tag not in self.tags:
                raise ConfigError(f"languages: {name} {tag!r:.40} is not one of the model's language tags")
        if type(self.src_suffix) is not bool:
            raise ConfigError("languages: src_suffix must be true or false")

    def tag_for(self, name: str) -> str:
        """The tag a person means by ``name``: the tag itself, or an ISO 639 code (``de``, ``deu``); InputError
        naming a few of the model's tags otherwise."""
        if name in self.tags:
            return name
        wanted = ISO_639_1.get(name.lower(), name.lower())
        found = next((t for t in self.tags if iso(t) == wanted), None)
        if found is None:
            shown = ", ".join(self.tags[:6])
            raise InputError(f"The model has no language {name!r}; name one by its ISO 639 code (de, fr, en) or by "
                             f"the model's own tag ({shown}, ... {len(self.tags)} in all).")
        return found

    def choose(self, src: str | None = None, tgt: str | None = None) -> Languages:
        """These languages with the source and/or target named by a person (``tag_for``); ``src`` "auto" guesses."""
        new_src = self.src if src is None else (None if src == "auto" else self.tag_for(src))
        new_tgt = self.tgt if tgt is None else self.tag_for(tgt)
        return Languages(self.tags, new_tgt, new_src, self.src_suffix)

    def source_tag(self, text: str) -> tuple[str, str | None]:
        """The source tag for ``text`` and, when it was guessed, a note saying so."""
        if self.src is not None:
            return self.src, None
        tag = guess_language(text, self)
        return tag, (f"Source language guessed from the text: {tag} (by its script and frequent words); choose it "
                     "with --src-lang or in the Convert list if that is wrong.")

    def to_dict(self) -> dict[str, Any]:
        return {"tags": list(self.tags), "tgt": self.tgt, "src": self.src, "src_suffix": self.src_suffix}

    @classmethod
    def from_dict(cls, data: Any) -> Languages:
        if not isinstance(data, dict) or set(data) - {"tags", "tgt", "src", "src_suffix"}:
            raise ConfigError("languages must be an object with tags, tgt, src and src_suffix")
        tags, tgt, src = data.get("tags"), data.get("tgt"), data.get("src")
        if not isinstance(tags, list) or not isinstance(tgt, str) or not (src is None or isinstance(src, str)):
            raise ConfigError("languages: tags must be a list, tgt a tag and src a tag or null")
        return cls(tuple(tags), tgt, src, data.get("src_suffix", False))


def _script_language(letters: list[str]) -> str | None:
    scripts = Counter(unicodedata.name(ch, "?").split(" ")[0] for ch in letters)
    script, count = scripts.most_common(1)[0]
    return _SCRIPTS.get(script) if count * 2 > len(letters) else None


def _latin_language(text: str) -> str:
    words = _WORDS.findall(text.lower())
    scores = {lang: sum(w in set(frequent.split()) for w in words) for lang, frequent in _FREQUENT.items()}
    scores = {lang: 2 * score for lang, score in scores.items()}  # a frequent word outweighs a letter group
    for lang, letters in _LETTERS.items():
        scores[lang] += 2 * sum(ch in letters for ch in text.lower())
    for lang, groups in _GROUPS.items():
        scores[lang] += sum(text.lower().count(group) for group in groups)
    best = max(scores.values())
    return next(lang for lang in _FREQUENT if scores[lang] == best)  # "de" first: the tie (and nothing) goes there


def guess_language(text: str, languages: Languages) -> str:
    """The model's tag for the language ``text`` is most likely in (see the module's note for the rule); when the
    model lacks that language, its first tag of the languages the rule prefers."""
    letters = [ch for ch in text if ch.isalpha()]
    wanted = (_script_language(letters) if letters else None) or _latin_language(text)
    for code in (wanted, *_FREQUENT):
        try:
            return languages.tag_for(code)
        except InputError:
            continue
    return languages.tags[0]
