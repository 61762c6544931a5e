"""A guess of the language one vocabulary token belongs to: English, German, French, another script, or unknown.

This is a HEURISTIC, written for the logit lens' pivot question (does a German->French model pass through English in
its middle layers?), and it is said to be one wherever its labels are shown. It never reads a corpus; its word lists
are short lists of frequent words (function words and the everyday nouns, colours and verbs of captioned scenes)
written for attnviz, not taken from any published list. The rule, in order:

1. A special token (``<eos>``, ``<unk>``, ``<|im_end|>``, a byte-fallback ``<0xE4>``), a label holding a byte that
   is not a whole character (``\\xc3``, as a byte-level tokenizer's label shows half a UTF-8 letter), or a piece
   with no letter (punctuation, digits, white space) -> ``unknown``.
2. Any letter outside the Latin script (Cyrillic, Greek, Han, Arabic...) -> ``other``.
3. A piece that continues a word (in a vocabulary that marks the pieces starting a word with "\u2581" or "\u0120",
   a piece without the mark; or a piece ending in "@@", whose word goes on) is judged only by its letters (step 5):
   "de" or "en" inside "Freunde" or "Garten" are not French. The first output token of an LLM whose prompt ends in a
   new line carries no mark either, and so is judged by its letters only.
4. A whole word (lower-cased, from an apostrophe on dropped: "l'" and "l'homme" are judged as "l", "it's" as "it")
   found in exactly one of the three word lists -> that language; found in two ("in", "man", "was": English and
   German; "a", "on", "me": English and French; "du", "des": German and French) -> ``unknown``.
5. Letters only one language writes: "ä ö ü ß" -> German, "é è ê ë à â ç î ï ô ù û œ æ" -> French (both kinds in
   one piece -> ``unknown``). Otherwise -> ``unknown``: a Latin word in no list ("garden", "Garten", "jardin").

So ``unknown`` means "not judged", not "none of the three"; shares of ``unknown`` say how much the lists cover.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from attnviz.engine.text.tokenize import WORD_START

LANGUAGES = ("en", "de", "fr", "other", "unknown")  # the labels, in the order tables and legends show them
LANGUAGE_LABELS = {"en": "English", "de": "German", "fr": "French", "other": "other script", "unknown": "unknown"}
HEURISTIC = ("the language of a token is a heuristic guess (word lists of frequent English, German and French "
             "words, letters only one of them writes, the script); 'unknown' means not judged")
MARKS = (WORD_START, "\u0120")  # SentencePiece's "▁", GPT-2's "Ġ" (a byte-level label kept raw)
CONTINUES = "@@"  # subword-nmt: the piece's word goes on in the next piece

_WORDS = {
    "en": """the a an and or but of to in on at by for with from into over under about after before between through
        during without than as is are was were be been being am has have had do does did not no yes this that these
        those there here it its he she they we you i me him her them us my your his their our who what which when
        where why how all some any each every many much more most other such only also very just still even then now
        again too so can could will would should may might must one two three four five man woman men women child
        children boy girl people dog cat horse ball water street road city house car bike bicycle tree beach snow
        grass field shirt jacket hat hair dress red blue green white black yellow brown young old little small big
        large tall while standing sitting walking running playing looking wearing holding riding jumping talking
        working eating down up out off around front near next behind outside inside something someone nothing day
        night time year world good new first last long right left well way work make made take get go going goes
        went come see look know think say said want need like give found table quickly slowly sees runs if because
        ride rides plays play reads book dogs cats group another building hands face looks food walks mountain boys
        shorts jeans pink picture few middle wooden""",
    "de": """der die das den dem des ein eine einer einem einen eines und oder aber nicht kein keine ist sind war
        waren wird werden wurde hat haben hatte sein ich du er sie es wir ihr mich mir dich dir sich uns euch mein
        dein unser auf aus bei mit nach von zu zum zur vor über unter durch für gegen ohne um im am ins vom beim an
        in als wie wenn dass weil ob auch noch schon nur sehr so hier dort da dann jetzt immer nie wieder mehr viel
        viele alle alles was wer wo warum welche welcher dieser diese dieses jeder jede jedes man mann frau kind
        kinder junge mädchen leute hund katze pferd wasser straße haus auto fahrrad baum strand schnee gras feld
        hemd jacke hut haar kleid rot blau grün weiß schwarz gelb braun jung alt klein groß steht sitzt läuft
        spielt trägt hält fährt springt schaut spricht arbeitet isst neben hinter draußen drinnen etwas jemand
        nichts tag nacht zeit jahr welt gut neu neue neuen erste letzte lang rechts links gehen kommen sehen machen
        sagen geben nehmen heute morgen gestern ja nein danke bitte zwei drei vier fünf will also sieht schnell
        langsam hunde spielen liest buch fahren anderen kleidung hintergrund kopf gekleidet gruppe mehrere stehen
        sitzen jungen kleinen frauen schwarzen""",
    "fr": """le la les l un une des du de d et ou mais ne n pas non oui est sont était être avoir a ai as ont avait
        je j tu il elle on nous vous ils elles me te se s moi toi lui leur leurs mon ma mes ton ta tes son sa ses
        notre votre nos vos ce c cet cette ces qui que qu quoi dont où quand comment pourquoi dans sur sous avec sans
        pour par chez entre vers après avant depuis pendant contre au aux en y très plus moins aussi encore déjà
        toujours jamais ici là alors maintenant bien tout tous toute toutes beaucoup homme hommes femme femmes
        enfant enfants garçon fille gens chien chat cheval balle eau rue route ville maison voiture vélo arbre
        plage neige herbe champ chemise veste chapeau cheveux robe rouge bleu bleue vert verte blanc blanche noir
        noire jaune jeune vieux petit petite grand grande debout assis marche joue regarde porte tient devant
        derrière dehors quelque chose rien jour nuit temps année monde bon bonne nouveau premier dernier long
        droite gauche aller venir voir faire dire donner prendre demain hier merci deux trois quatre cinq voit
        vite lentement chiens jouent lit livre groupe autre bâtiment mains visage personnes montagne""",
}
WORDS = {lang: frozenset(text.split()) for lang, text in _WORDS.items()}
LETTERS = {"de": frozenset("äöüß"), "fr": frozenset("éèêëàâçîïôùûœæ")}
_APOSTROPHES = "'\u2019"
_JOINERS = set(_APOSTROPHES) | {"-"}


def marks_word_starts(tokens: Iterable[str]) -> bool:
    """Whether a vocabulary marks the pieces that start a word ("\u2581" or "\u0120" in front), so that a piece
    without the mark continues a word (a word-level vocabulary marks nothing: every token is a word)."""
    return any(token[:1] in MARKS and len(token) > 1 for token in tokens)


def _letters_language(word: str) -> str:
    found = [lang for lang, letters in LETTERS.items() if letters & set(word)]
    return found[0] if len(found) == 1 else "unknown"


def special_label(token: str) -> bool:
    """A special token (``<eos>``, ``<|im_end|>``, ``<0xE4>``) or a label showing a lone byte (``\\xc3``)."""
    return (token.startswith("<") and token.endswith(">") and len(token) > 2) or "\\x" in token


def token_language(token: str, marked: bool = False) -> str:
    """The language of one token label (see the module's rule): one of ``LANGUAGES``. ``marked``: the vocabulary
    marks word-starting pieces (``marks_word_starts``), so an unmarked piece continues a word."""
    if special_label(token):
        return "unknown"
    starts = token[:1] in MARKS or token[:1].isspace()
    text = token.lstrip("".join(MARKS)).strip()
    whole = (starts or not marked) and not text.endswith(CONTINUES)
    text = text.removesuffix(CONTINUES).removesuffix("</w>").rstrip(_APOSTROPHES).lower()
    text = text.replace("\u2019", "'").split("'")[0] if whole else text  # "l'homme" is judged by "l", "it's" by "it"
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "unknown"
    if any(not unicodedata.name(c, "").startswith("LATIN") for c in letters):
        return "other"
    if whole and all(c.isalpha() or c in _JOINERS for c in text):
        found = [lang for lang, words in WORDS.items() if text in words]
        if found:
            return found[0] if len(found) == 1 else "unknown"
    return _letters_language(text)
