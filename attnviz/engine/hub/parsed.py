"""Each folder file parsed once per opening: a folder is inspected (its card, its size checked before any weight
is read) and then loaded, and both read the same files (a 256k-entry vocabulary takes a second). ``parsed_once``
scopes a memo to one opening, in the calling thread's context only (the app opens models in worker threads), so a
folder changed on disk is read afresh the next time it is opened and nothing stays in memory after. A function
wrapped by ``once`` returns, within that scope, the object it returned for the same arguments (a frozen dataclass
its callers only read); outside one, it reads as it always did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

_MEMO: ContextVar[dict[tuple, Any] | None] = ContextVar("attnviz_parsed_once", default=None)


@contextmanager
def parsed_once() -> Iterator[None]:
    """Within this block, every ``once`` function parses a folder's files once."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def once(parse: Callable[..., T]) -> Callable[..., T]:
    """``parse(folder, *more)`` memoised inside ``parsed_once`` (keyed on the resolved folder and the other
    arguments); a parse that raises is not kept."""
    @wraps(parse)
    def wrapper(folder: Any, *more: Any) -> T:
        memo = _MEMO.get()
        if memo is None:
            return parse(folder, *more)
        key = (parse.__module__, parse.__qualname__, str(Path(folder).resolve()), *more)
        if key not in memo:
            memo[key] = parse(folder, *more)
        return memo[key]

    return wrapper
