"""What the Translate tab hands its workers: one decode's events as a request asks it (the main decode, or a what-if
branch after a forced prefix), and a whole decode's output tokens (the every-head-on side of a heads-off comparison).
Qt-free; torch runs only inside the translator's generators, in the worker's thread.

The tab's workers share one model with each other and with the Analysis tab's, and run at the same time: what a job
reads or changes inside the network goes through probe points scoped to its thread (see ``gui.worker``), so a
decode neither waits for an attribution or a corpus job nor sees what they capture.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import BeamDone, BeamStep, DecodeStep, EncoderPass
from attnviz.engine.search.tree import SearchEvent, SearchTree
from attnviz.session.translate.document import DecodeRequest


class Decoder(Protocol):
    """The translator's two decodes as events."""

    def steps(self, text: str, decode: DecodeConfig = ..., *,
              forced: Sequence[int] | None = None) -> Iterator[EncoderPass | DecodeStep]: ...

    def beam_steps(self, text: str, decode: DecodeConfig,
                   forced: Sequence[int] | None = None) -> Iterator[EncoderPass | BeamStep | BeamDone]: ...


@dataclass(frozen=True)
class DecodeJob:
    """Worker job: the events of the decode ``request`` asks (beam or greedy/sampled), taking the ``forced`` target
    ids first when given (None: a language model's typed prefix, as the text says)."""

    decoder: Decoder
    request: DecodeRequest
    forced: tuple[int, ...] | None = None

    def __call__(self, stop: threading.Event) -> Iterator[SearchEvent]:
        text, decode = self.request.text, self.request.decode
        if self.request.beam:
            return self.decoder.beam_steps(text, decode, forced=self.forced)
        return self.decoder.steps(text, decode, forced=self.forced)


@dataclass(frozen=True)
class FinalTokensJob:
    """Worker job: the output tokens the decode ``request`` chooses, as one event ``(key, tokens)``."""

    decoder: Decoder
    request: DecodeRequest
    key: Hashable  # which decode these tokens answer, for the receiver to match

    def __call__(self, stop: threading.Event) -> Iterator[tuple[Hashable, list[str]]]:
        tree = SearchTree.from_events(DecodeJob(self.decoder, self.request)(stop))
        yield self.key, [s.token for s in tree.path(tree.chosen)] if tree.chosen is not None else []
