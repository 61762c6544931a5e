"""Vocab: the token <-> id mapping of one language side, owner of the special tokens and their fixed ids.

Specials come first, always in this order: ``<unk>`` 0, ``<pad>`` 1, ``<sos>`` 2, ``<eos>`` 3. Ordinary tokens follow
by descending frequency, ties alphabetically, so the same counts always give the same ids. A vocabulary
serialises to a plain list of strings (the id is the position), which is how checkpoints store it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from attnviz.engine.errors import ConfigError

UNK, PAD, SOS, EOS = "<unk>", "<pad>", "<sos>", "<eos>"
SPECIALS = (UNK, PAD, SOS, EOS)
UNK_ID, PAD_ID, SOS_ID, EOS_ID = range(4)


class Vocab:
    """An immutable list of token types with a reverse index."""

    def __init__(self, itos: Sequence[str]):
        itos = list(itos)
        if tuple(itos[:4]) != SPECIALS:
            raise ConfigError(f"a vocabulary must start with the specials {list(SPECIALS)}, got {itos[:4]}")
        stoi = {tok: i for i, tok in enumerate(itos)}
        if len(stoi) != len(itos):
            dupes = sorted(t for t, n in Counter(itos).items() if n > 1)[:5]
            raise ConfigError(f"a vocabulary must not repeat tokens; repeated: {dupes}")
        if "" in stoi or not all(isinstance(t, str) for t in stoi):
            raise ConfigError("every vocabulary entry must be a non-empty string")
        self._itos = itos
        self._stoi = stoi

    @classmethod
    def build(cls, counts: Counter[str] | Iterable[Iterable[str]], min_freq: int = 1,
              max_size: int | None = None) -> Vocab:
        """Build from token counts (or from tokenized sentences); ``max_size`` counts the specials too."""
        if min_freq < 1:
            raise ConfigError(f"min_freq must be at least 1, not {min_freq}")
        if not isinstance(counts, Counter):
            counter: Counter[str] = Counter()
            for sentence in counts:
                counter.update(sentence)
            counts = counter
        ordered = sorted((t for t, n in counts.items() if n >= min_freq and t not in SPECIALS),
                         key=lambda t: (-counts[t], t))
        if max_size is not None:
            if max_size < len(SPECIALS):
                raise ConfigError(f"max_size must leave room for the {len(SPECIALS)} specials, not {max_size}")
            ordered = ordered[: max_size - len(SPECIALS)]
        return cls(list(SPECIALS) + ordered)

    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, token: object) -> bool:
        return token in self._stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and other._itos == self._itos

    def __repr__(self) -> str:
        return f"Vocab({len(self)} types)"

    def id(self, token: str) -> int:
        return self._stoi.get(token, UNK_ID)

    def token(self, index: int) -> str:
        return self._itos[index]

    def encode(self, tokens: Iterable[str], add_sos_eos: bool = False) -> list[int]:
        ids = [self._stoi.get(t, UNK_ID) for t in tokens]
        return [SOS_ID, *ids, EOS_ID] if add_sos_eos else ids

    def decode(self, ids: Iterable[int], strip_specials: bool = True) -> list[str]:
        """Ids to tokens; with ``strip_specials`` stops at ``<eos>`` and drops ``<sos>``/``<pad>``."""
        out = []
        for i in ids:
            i = int(i)
            if strip_specials:
                if i == EOS_ID:
                    break
                if i in (SOS_ID, PAD_ID):
                    continue
            out.append(self._itos[i])
        return out

    def to_list(self) -> list[str]:
        return list(self._itos)

    @classmethod
    def from_list(cls, itos: Sequence[str]) -> Vocab:
        return cls(itos)
