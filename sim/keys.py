"""Declarations of config keys: what a module accepts, with defaults, units and documentation.

A memory policy, a reclamation protocol or a workload declares its keys beside its code with
these plain records; cluster/config validates TOML against them (units, ranges, choices,
"did you mean" hints) and generates the README's key reference from them, so the allowed
values and their documentation come from one place. Nothing here reads or validates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

REQUIRED = object()


@dataclass(frozen=True)
class Issue:
    """One problem in a config: where (dotted key path) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(frozen=True)
class Field:
    """A leaf value.

    kind: int, int_or_auto (a whole number or "auto"), float, bool, str, choice, size (bytes),
    frequency (Hz), bandwidth (B/s), time (s), duration (s; a string naming its unit, never a bare
    number), flops (FLOP/s), cycles (int; also a time string converted at ``clock``), list (items
    checked by ``item``), any. ``choices`` may be a registry (read when the config is checked, so an
    implementation registered later is allowed).
    """

    kind: str
    default: Any = None
    doc: str = ""
    choices: Iterable[Any] = ()
    min: float | None = None
    max: float | None = None
    item: "Field | None" = None
    clock: str | None = None
    unit: str = ""  # shown in the reference ("bytes", "cycles", ...)
    file: bool = False  # a file's path: a relative one in a config file is taken from the file's directory

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


Check = Callable[[dict[str, Any]], list[tuple[str, str]]]
GivenCheck = Callable[[dict[str, Any], dict[str, Any]], list[tuple[str, str]]]


class Table:
    """A TOML table: named fields (Fields or nested tables).

    ``extend`` (optional) returns more fields when the table is read, e.g. the keys every
    registered memory policy declares; ``checks`` are cross-field checks on the table's
    normalised values: fn(values) -> [(key, message)]; ``given_checks`` also see what the config
    itself gave, before defaults were filled in: fn(given, values) -> [(key, message)]; ``fill``
    puts a named preset's keys under those the config gave: fn(given) -> given, filled.
    """

    def __init__(self, fields: dict[str, Any] | None = None, doc: str = "", checks: list[Check] | None = None,
                 extend: Callable[[], dict[str, Any]] | None = None, given_checks: list[GivenCheck] | None = None,
                 fill: Callable[[dict[str, Any]], dict[str, Any]] | None = None):
        self.fill = fill
        self._fields = dict(fields or {})
        self.doc = doc
        self.checks = list(checks or [])
        self.given_checks = list(given_checks or [])
        self.extend = extend

    @property
    def fields(self) -> dict[str, Any]:
        if self.extend is None:
            return self._fields
        return {**self._fields, **self.extend()}


@dataclass
class TableList:
    table: Table
    doc: str = ""
    default: list[Any] | None = None


@dataclass
class OpenTable:
    """A table with free keys; each value checked by ``value`` (a Field) if given."""

    value: Field | None = None
    doc: str = ""


def merge_fields(sources: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The union of several implementations' keys (name -> Field); one key declared twice
    must be declared alike (``sources``: (implementation name, its fields))."""
    out: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for name, fields in sources:
        for key, f in fields.items():
            if key in out and out[key] != f:
                raise ValueError(f"config key {key!r} is declared differently by {owner[key]!r} and {name!r}")
            out.setdefault(key, f)
            owner.setdefault(key, name)
    return out
