"""Traffic crossing shard cuts, declared once as columns: the base of every boundary type.

What a shard sends across its cut in an epoch (flits and credits, packet heads, messages
between chips, a chip's message records) is rows of int64 columns grouped in sections: a
section's columns have one value per row (a flit, a credit, a packet, a message). A traffic
class is a dataclass whose fields are declared with ``column`` (one int64 array per field),
``matrix`` (one [rows, k] array, a record per row, e.g. a message's ``FIELDS``) or ``part``
(another traffic value, e.g. a chip's network traffic, whose own type its NoC model decides).
From that declaration ``Columnar`` derives everything the epoch loop and the wire need: how
many rows it holds, the earliest cycle any of it is due, the flits it carries (in transit
while undelivered), its concatenation with others of its type, and its encoding as sections
of equal-length int64 columns (cluster/parallel/wire.py) and back. A new boundary type is
its fields; nothing here is written again per type.

A value is its own type's witness: ``join``, ``decode`` and ``widths`` are asked of a value
(an empty one will do), because a value with a ``part`` knows its part's type only through
the part it holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, ClassVar, Literal, Protocol, Self, dataclass_transform, runtime_checkable

import numpy as np

_EMPTY = np.zeros(0, dtype=np.int64)
_EMPTY.flags.writeable = False  # shared by every empty column: never written

# how a section counts the flits it carries: a row is one flit, or a column holds each row's
Flits = Literal["row", "value"]


@runtime_checkable
class Traffic(Protocol):
    """What a shard sends across its cut in one epoch, as the epoch loop and the wire use it
    (``Columnar`` derives all of it from a declaration of columns)."""

    def __len__(self) -> int:
        """Rows of every kind (0: nothing to deliver)."""
        ...

    def earliest(self) -> float:
        """The earliest cycle any of it is due (inf: nothing)."""
        ...

    def flit_count(self) -> int:
        """Flits it carries: in transit while undelivered."""
        ...

    def widths(self) -> tuple[int, ...]:
        """Columns in each section ``encode`` gives."""
        ...

    def encode(self) -> list[list[np.ndarray]]:
        """Sections of equal-length int64 columns (cluster/parallel/wire.py)."""
        ...

    def decode(self, sections: Sequence[Sequence[np.ndarray]]) -> Self:
        """A value of this one's type from what ``encode`` gave."""
        ...

    def nothing(self) -> Self:
        """Traffic of this one's type addressed to nobody."""
        ...

    def join(self, parts: Sequence[Self]) -> Self:
        """This traffic and ``parts`` together, in that order."""
        ...


@dataclass(frozen=True)
class Columns:
    """A section of one int64 array per column (``names``, in wire order)."""

    name: str
    names: tuple[str, ...]
    due: str | None = None  # the column of the cycle each row is due where it arrives
    flits: str | None = None  # the column of each row's flits
    flit_per_row: bool = False  # each row is one flit


@dataclass(frozen=True)
class Matrix:
    """A section held as one [rows, width] int64 array (a record per row), on the wire column by column."""

    name: str
    width: int


@dataclass(frozen=True)
class Part:
    """Another traffic value, held whole; on the wire its own sections, in its own order."""

    name: str


Section = Columns | Matrix | Part


def column(section: str, *, due: bool = False, flits: Flits | None = None) -> Any:
    """A field holding one int64 column of ``section``: ``due`` marks the cycle each row is due
    where it arrives (``earliest``); ``flits`` how the rows count flits ("row": each row is one,
    "value": this column holds each row's)."""
    return dataclasses.field(default_factory=lambda: _EMPTY,
                             metadata={"section": section, "due": due, "flits": flits})


def matrix(names: Sequence[str], *, kw_only: bool = False) -> Any:
    """A field holding a [rows, len(names)] int64 array: a section of its own, a record per row."""
    width = len(names)
    return dataclasses.field(default_factory=lambda: np.zeros((0, width), dtype=np.int64),
                             metadata={"matrix": width}, kw_only=kw_only)


def part() -> Any:
    """A field holding another traffic value (no default: its type is the holder's to give)."""
    return dataclasses.field(metadata={"part": True})


def _sections(cls: type) -> tuple[Section, ...]:
    """The sections a traffic dataclass declares, in field order (a section where its first column is)."""
    out: list[Section] = []
    columns: dict[str, list[dataclasses.Field[Any]]] = {}
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if "part" in meta:
            out.append(Part(f.name))
        elif "matrix" in meta:
            out.append(Matrix(f.name, meta["matrix"]))
        elif "section" in meta:
            sec = meta["section"]
            if sec not in columns:
                columns[sec] = []
                out.append(Columns(sec, ()))
            columns[sec].append(f)
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: declare it with column(), matrix() or part()")
    resolved: list[Section] = []
    for s in out:
        if isinstance(s, Columns):
            fs = columns[s.name]
            due = [f.name for f in fs if f.metadata["due"]]
            value = [f.name for f in fs if f.metadata["flits"] == "value"]
            rows = any(f.metadata["flits"] == "row" for f in fs)
            if len(due) > 1 or len(value) + rows > 1:
                raise TypeError(f"{cls.__name__}: section {s.name!r} declares more than one due or flits column")
            s = Columns(s.name, tuple(f.name for f in fs), due[0] if due else None, value[0] if value else None, rows)
        resolved.append(s)
    return tuple(resolved)


def _length(firsts: tuple[str, ...]) -> Any:
    """``__len__``: rows of every section (one attribute lookup each: it is asked every window)."""
    get = attrgetter(*firsts)
    if len(firsts) == 1:
        return lambda self: len(get(self))
    return lambda self: sum(map(len, get(self)))


@dataclass_transform(eq_default=False)
class Columnar:
    """Base of a traffic type declared with ``column``/``matrix``/``part`` (module docstring): a
    subclass is made a dataclass (no ``__eq__``: its fields are arrays) and its sections derived."""

    SECTIONS: ClassVar[tuple[Section, ...]] = ()
    _STATIC_WIDTHS: ClassVar[tuple[int, ...] | None] = None  # a type without parts: its widths

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(eq=False)(cls)
        cls.SECTIONS = _sections(cls)
        firsts = tuple(s.names[0] if isinstance(s, Columns) else s.name for s in cls.SECTIONS)
        cls.__len__ = _length(firsts)  # type: ignore[method-assign]
        if not any(isinstance(s, Part) for s in cls.SECTIONS):
            cls._STATIC_WIDTHS = tuple(len(s.names) if isinstance(s, Columns) else s.width
                                       for s in cls.SECTIONS if not isinstance(s, Part))

    def __len__(self) -> int:
        """Rows of every section (derived per type when it is declared)."""
        raise NotImplementedError

    @classmethod
    def columns(cls, section: str) -> tuple[str, ...]:
        """The columns of the section called ``section``, in wire order."""
        for s in cls.SECTIONS:
            if isinstance(s, Columns) and s.name == section:
                return s.names
        raise KeyError(f"{cls.__name__} has no section of columns {section!r}")

    def earliest(self) -> float:
        """The earliest cycle any row is due where it arrives (inf: none)."""
        least = float("inf")
        for s in self.SECTIONS:
            if isinstance(s, Part):
                least = min(least, getattr(self, s.name).earliest())
            elif isinstance(s, Columns) and s.due is not None:
                col = getattr(self, s.due)
                if len(col):
                    least = min(least, float(col.min()))
        return least

    def flit_count(self) -> int:
        """Flits it carries (in transit while undelivered)."""
        n = 0
        for s in self.SECTIONS:
            if isinstance(s, Part):
                n += getattr(self, s.name).flit_count()
            elif isinstance(s, Columns) and s.flit_per_row:
                n += len(getattr(self, s.names[0]))
            elif isinstance(s, Columns) and s.flits is not None:
                n += int(getattr(self, s.flits).sum())
        return n

    def widths(self) -> tuple[int, ...]:
        """Columns in each section ``encode`` gives, in order."""
        if self._STATIC_WIDTHS is not None:
            return self._STATIC_WIDTHS
        out: list[int] = []
        for s in self.SECTIONS:
            if isinstance(s, Part):
                out += getattr(self, s.name).widths()
            else:
                out.append(len(s.names) if isinstance(s, Columns) else s.width)
        return tuple(out)

    def encode(self) -> list[list[np.ndarray]]:
        """Its sections of equal-length int64 columns, in declaration order (a part's in its own)."""
        out: list[list[np.ndarray]] = []
        for s in self.SECTIONS:
            if isinstance(s, Part):
                out += getattr(self, s.name).encode()
            elif isinstance(s, Columns):
                out.append([getattr(self, n) for n in s.names])
            else:
                out.append([np.ascontiguousarray(c) for c in getattr(self, s.name).T])
        return out

    def decode(self, sections: Sequence[Sequence[np.ndarray]]) -> Self:
        """A value of this one's type (its parts' types too) from what ``encode`` gave."""
        values: dict[str, Any] = {}
        k = 0
        for s in self.SECTIONS:
            if isinstance(s, Part):
                mine = getattr(self, s.name)
                m = len(mine.widths())
                values[s.name] = mine.decode(sections[k:k + m])
                k += m
                continue
            sec = sections[k]
            k += 1
            if isinstance(s, Columns):
                values.update(zip(s.names, sec))
            elif len(sec[0]):
                values[s.name] = np.stack(sec, axis=1)
            else:
                values[s.name] = np.zeros((0, s.width), dtype=np.int64)
        return type(self)(**values)

    def nothing(self) -> Self:
        """Traffic of this one's type (its parts' types too) addressed to nobody."""
        parts = {s.name: getattr(self, s.name).nothing() for s in self.SECTIONS if isinstance(s, Part)}
        return type(self)(**parts)

    def join(self, parts: Sequence[Self]) -> Self:
        """This traffic and ``parts`` together, in that order (rows keep their order)."""
        some = [p for p in (self, *parts) if len(p)]
        if not some:
            return self
        if len(some) == 1:
            return some[0]
        values: dict[str, Any] = {}
        for s in self.SECTIONS:
            if isinstance(s, Part):
                first, *rest = [getattr(p, s.name) for p in some]
                values[s.name] = first.join(rest)
            elif isinstance(s, Columns):
                for n in s.names:
                    values[n] = np.concatenate([getattr(p, n) for p in some])
            else:
                values[s.name] = np.concatenate([getattr(p, s.name) for p in some])
        return type(self)(**values)

    def select(self, masks: Sequence[np.ndarray]) -> Self:
        """The rows each section's mask keeps, one mask per section (a section with no rows stays
        empty: a matrix that some traffic carries only sometimes). Not for a type with parts."""
        values: dict[str, Any] = {}
        for s, keep in zip(self.SECTIONS, masks, strict=True):
            if isinstance(s, Part):
                raise TypeError(f"{type(self).__name__}: select the part {s.name!r} with its own type's routing")
            for n in (s.names if isinstance(s, Columns) else (s.name,)):
                col = getattr(self, n)
                values[n] = col[keep] if len(col) else col
        return type(self)(**values)
