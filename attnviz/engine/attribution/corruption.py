"""The corrupted input of activation patching as a user writes it, read without a model (torch-free, so that
``AttributionSettings`` can check it on creation): a whole sentence, or a what-if edit of one source token.

``WHICH=WORD`` (no spaces) is an edit: WHICH is a source token's 1-based position among the tokens the model reads
(``<sos>`` and ``<eos>`` included, as the map's columns show them) or the token itself, and WORD the one source token
that replaces it (``3=Hund``, ``Katze=Hund``). Any other text is a corrupted sentence, which must read as as many
tokens as the clean one, since patching compares the two runs position by position. No corruption (None) is the
default: every source token but the specials replaced by ``<unk>``. Resolving it against a model's vocabulary and
tokenizer is ``patching.corrupted``'s work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from attnviz.engine.errors import ConfigError

EDIT = re.compile(r"^(\S+?)=(\S+)$")  # WHICH=WORD, the first "=" splitting (a word may hold one)
DEFAULT = "every source token but <sos>/<eos> replaced by <unk>"


@dataclass(frozen=True)
class Corruption:
    """What to corrupt: a ``sentence``, or the token ``which`` (a position "3" or a token "Katze") replaced by
    ``word``; all None for the default (every token ``<unk>``)."""

    sentence: str | None = None
    which: str | None = None
    word: str | None = None

    @property
    def position(self) -> int | None:
        """The edited token's 1-based position when the edit names one by number."""
        return int(self.which) if self.which is not None and self.which.isdecimal() else None

    @property
    def is_default(self) -> bool:
        return self.sentence is None and self.which is None


def parse_corruption(text: str | None) -> Corruption:
    """``text`` as a ``Corruption``; ConfigError when it is blank, not text, or an edit of position 0."""
    if text is None:
        return Corruption()
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("corrupt must be a corrupted sentence of as many tokens, or WHICH=WORD (a source token's "
                          "1-based position or the token itself, and the token replacing it), or None for <unk> "
                          "everywhere")
    text = text.strip()
    found = EDIT.match(text)
    if found is None:
        return Corruption(sentence=text)
    which, word = found.groups()
    if which.isdecimal() and int(which) < 1:
        raise ConfigError(f"corrupt {text!r}: source positions count from 1 (the first token the model reads)")
    return Corruption(which=which, word=word)
