"""The listeners of a Qt-free document (a tab's run or decode): plain callables told each change, in the order they
subscribed. A listener added while the others are being told hears from the next change on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

Change = TypeVar("Change")


class Listeners(Generic[Change]):
    def __init__(self) -> None:
        self._listeners: list[Callable[[Change], None]] = []

    def subscribe(self, listener: Callable[[Change], None]) -> None:
        self._listeners.append(listener)

    def tell(self, change: Change) -> None:
        for listener in list(self._listeners):
            listener(change)
