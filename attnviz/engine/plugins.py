"""Plug-in registries: named entries that register themselves from the modules of one package.

The model kinds (``engine.kinds``) and the imported folder formats (``engine.hub``) are each one ``Registry``: a
module of the package calls ``register(entry)`` at import time, and the package's modules are imported the first
time anyone asks for the entries, so adding a plug-in is adding a module. A test may register a throwaway entry
for the length of a ``with registered(entry)`` block. Torch-free, like the registries built on it.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


E = TypeVar("E", bound=Named)


class Registry(Generic[E]):
    """The entries of one plug-in package, by name, in registration order."""

    def __init__(self, what: str, package: str, discovers: Callable[[str], bool]):
        self.what = what  # what an entry is, for messages ("model kind")
        self.package = package  # whose modules register the entries
        self.discovers = discovers  # which module names of the package discovery imports
        self._entries: dict[str, E] = {}
        self._origin: dict[str, str] = {}  # the module that registered each entry
        self._discovered = False

    def register(self, entry: E) -> E:
        """Add ``entry`` (a module of the package calls it at import; a test may call it for a throwaway one)."""
        if entry.name in self._entries and self._entries[entry.name] is not entry:
            raise ValueError(f"{self.what} {entry.name!r} is registered twice")
        self._entries[entry.name] = entry
        self._origin.setdefault(entry.name, sys._getframe(1).f_globals.get("__name__", ""))
        return entry

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    @contextmanager
    def registered(self, entry: E) -> Iterator[E]:
        """Register ``entry`` for the duration of a ``with`` block."""
        self.register(entry)
        try:
            yield entry
        finally:
            self.unregister(entry.name)

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        package = importlib.import_module(self.package)
        names = [module.name for module in pkgutil.iter_modules(package.__path__) if self.discovers(module.name)]
        for name in names:
            importlib.import_module(f"{self.package}.{name}")
        # the package's listing order, whichever module happened to be imported first (a subpackage registering in
        # its __init__ is imported whenever any of its modules is); entries from elsewhere (a test's) keep theirs
        place = {f"{self.package}.{name}": i for i, name in enumerate(names)}

        def rank(item: tuple[int, str]) -> tuple[int, int]:
            origin = self._origin.get(item[1], "")
            top = ".".join(origin.split(".")[:len(self.package.split(".")) + 1])
            return place.get(top, len(place)), item[0]

        order = sorted(enumerate(self._entries), key=rank)
        self._entries = {name: self._entries[name] for _, name in order}

    def entries(self) -> Mapping[str, E]:
        """Every registered entry by name (a read-only view), once the package's modules have registered theirs."""
        self._discover()
        return MappingProxyType(self._entries)
