"""Registries: a name -> implementation table for each seam (sim's networks, policies, workloads...;
mapping's workload generators). It lives in mapping, the lowest package, so that mapping (which
imports nothing of sim) has registries too; sim/registry.py is where sim's seams import it from.

An implementation registers itself where it is defined (``@REGISTRY.register("name")``), so
adding one is a new module and its tests. A registry created with ``packages`` imports
every module of those packages the first time it is read, so built-in implementations are
found without a list of them anywhere; the config schema reads ``names()`` for the allowed
values and their documentation. Lookups of an unknown name raise ``KeyError`` naming the
known ones and the closest match.

A registry is filled once, at import time, with classes and functions, never with
simulation state, so it does not break determinism across shards or processes.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Names of the implementations of one seam (listed in alphabetical order, whatever
    order their modules happened to be imported in)."""

    def __init__(self, what: str, packages: tuple[str, ...] = ()):
        self.what = what  # "memory policy", "workload", ... (for messages)
        self.packages = packages
        self._items: dict[str, T] = {}
        self._loaded = not packages

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: file the decorated class or function under ``name``."""

        def add(item: T) -> T:
            old = self._items.get(name)
            if old is not None and old is not item and _qualname(old) != _qualname(item):
                raise ValueError(f"{self.what} {name!r} is already registered ({_qualname(old)})")
            self._items[name] = item
            return item

        return add

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that register a throwaway implementation clean up with it)."""
        self._items.pop(name, None)

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for package in self.packages:
            pkg = importlib.import_module(package)
            for info in pkgutil.iter_modules(pkg.__path__):
                if not info.name.startswith("_"):
                    importlib.import_module(f"{package}.{info.name}")

    def names(self) -> tuple[str, ...]:
        self._load()
        return tuple(sorted(self._items))

    def get(self, name: str) -> T:
        self._load()
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "none"
            close = difflib.get_close_matches(str(name), list(self._items), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise KeyError(f"unknown {self.what} {name!r}{hint}; known: {known}") from None

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def items(self) -> list[tuple[str, T]]:
        self._load()
        return sorted(self._items.items())


def _qualname(item: object) -> str:
    return f"{getattr(item, '__module__', '?')}.{getattr(item, '__qualname__', repr(item))}"
