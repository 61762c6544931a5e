"""A vocabulary shortlist (opt-in, ``attnviz translate --vmap FILE``): the output projection of a batched search
restricted to the target tokens a batch's sources make candidates, as CTranslate2's vocabulary map (``vmap``)
restricts it.

The file is CTranslate2's: one rule a line, ``src_1 ... src_N<TAB>tgt_1 ... tgt_K``: the target tokens are candidates
wherever the source pieces ``src_1 ... src_N`` occur in a row; a line with no source pieces lists tokens that are
always candidates. A batch's candidates are those of every n-gram of its sources, the always-candidates, attnviz's
special tokens and the ids a search forces (a target language tag). The search then projects onto the candidates'
rows alone (``IncrementalModel.restricted``) and gives every other token the log-probability -inf: a token outside
the shortlist is never chosen, and the log-softmax runs over the candidates only, so scores (and, where the dropped
tokens held probability, a beam's ranking) are the restricted model's. Where every token the full search chooses
is a candidate, a greedy search chooses the same tokens (``tests/engine/test_shortlist.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from attnviz.engine.errors import InputError
from attnviz.engine.text.vocab import SPECIALS, Vocab

NEG_INF = float("-inf")


@dataclass(frozen=True)
class Vmap:
    """A vocabulary map's rules: source n-gram (a tuple of pieces) -> target pieces."""

    rules: dict[tuple[str, ...], tuple[str, ...]]
    longest: int  # the longest source n-gram of any rule

    @classmethod
    def read(cls, path: str | Path) -> Vmap:
        """Read a CTranslate2 vocabulary map; a file that is not one is refused in one line (``InputError``)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise InputError(f"--vmap {path} cannot be read ({reason}); give a UTF-8 text file of lines "
                             "'SOURCE PIECES<TAB>TARGET PIECES'") from None
        rules: dict[tuple[str, ...], tuple[str, ...]] = {}
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            if line.count("\t") != 1:
                raise InputError(f"--vmap {path}: line {number} has {line.count(chr(9))} tabs; each line is 'SOURCE "
                                 "PIECES<TAB>TARGET PIECES' (one tab; nothing before it for always-candidates)")
            key, targets = line.split("\t")
            ngram = tuple(key.split())
            rules[ngram] = rules.get(ngram, ()) + tuple(targets.split())
        if not rules:
            raise InputError(f"--vmap {path} holds no rules; each line is 'SOURCE PIECES<TAB>TARGET PIECES'")
        return cls(rules, max(len(k) for k in rules))

    def targets(self, sources: Iterable[Sequence[str]]) -> set[str]:
        """The target pieces of every rule whose n-gram occurs in one of ``sources``, with the always-candidates."""
        found = set(self.rules.get((), ()))
        for pieces in sources:
            for n in range(1, self.longest + 1):
                for start in range(len(pieces) - n + 1):
                    found.update(self.rules.get(tuple(pieces[start:start + n]), ()))
        return found


@dataclass(frozen=True)
class Shortlist:
    """A vocabulary map read against a model's target vocabulary."""

    vmap: Vmap
    vocab: Vocab
    unknown: int  # target pieces the map names that the vocabulary lacks (left out)

    @classmethod
    def of(cls, vmap: Vmap, vocab: Vocab) -> Shortlist:
        named = {piece for targets in vmap.rules.values() for piece in targets}
        return cls(vmap, vocab, sum(1 for piece in named if piece not in vocab))

    def candidates(self, sources: Iterable[Sequence[str]], forced: Iterable[int] = ()) -> list[int]:
        """Sorted target ids a batch of ``sources`` (each a list of source pieces) may produce."""
        ids = {self.vocab.id(piece) for piece in self.vmap.targets(sources) if piece in self.vocab}
        ids.update(range(len(SPECIALS)))
        ids.update(i for i in forced if i >= 0)  # -1: no forced token
        return sorted(ids)


@dataclass(frozen=True)
class Restriction:
    """One batch's candidates and the projection onto them (``IncrementalModel.restricted``)."""

    ids: Tensor  # [K] target ids, sorted
    project: Callable[[Tensor], Tensor]  # hidden [N, D] -> logits [N, K]
    vocab_size: int

    def logits(self, hidden: Tensor) -> Tensor:
        """Logits [N, V] of ``hidden`` [N, D]: the candidates' computed, every other token's -inf."""
        small = self.project(hidden)
        full = small.new_full((hidden.size(0), self.vocab_size), NEG_INF)
        full[:, self.ids] = small
        return full


def restriction(model, ids: Sequence[int], vocab_size: int) -> Restriction:
    """The restriction of ``model``'s output to ``ids``; refused in one line for a kind that cannot restrict it."""
    index = torch.tensor(list(ids), dtype=torch.long, device=next(model.parameters()).device)
    project = model.restricted(index)
    if project is None:
        raise InputError(f"--vmap restricts a Transformer translation model's output vocabulary; a "
                         f"{type(model).__name__} cannot be restricted. Translate without --vmap")
    return Restriction(index, project, vocab_size)


def step_logits(model, tokens: Tensor, cache, restricted: Restriction | None) -> Tensor:
    """A no-capture step's logits [N, V]: the model's own (``step``), or the shortlist's."""
    if restricted is None:
        return model.step(tokens, cache, False)[0]
    out = model.decode(tokens[:, None], None, False, cache)
    return restricted.logits(out.hidden[:, -1])
