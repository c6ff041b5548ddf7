"""Flits and credits crossing the cuts between shards of the cycle-level NoC.

Rows carry global ids: an input VC ``(router * PORTS + port) * vcs + vc`` for a flit (the
buffer it lands in) and an output VC of the same form for a credit (the counter it
replenishes), with the cycle each is due there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from sim.noc.ports import PORTS

_EMPTY = np.zeros(0, dtype=np.int64)


def _empty() -> np.ndarray:
    return _EMPTY


@dataclass
class FlitBoundary:
    """Flits and credits crossing shard boundaries, with global VC ids and due cycles."""

    flit_cycle: np.ndarray = field(default_factory=_empty)
    flit_ivc: np.ndarray = field(default_factory=_empty)
    flit_pkt: np.ndarray = field(default_factory=_empty)
    flit_dst: np.ndarray = field(default_factory=_empty)
    flit_flag: np.ndarray = field(default_factory=_empty)
    credit_cycle: np.ndarray = field(default_factory=_empty)
    credit_ovc: np.ndarray = field(default_factory=_empty)

    SECTIONS: ClassVar[tuple[tuple[str, ...], ...]] = (
        ("flit_cycle", "flit_ivc", "flit_pkt", "flit_dst", "flit_flag"), ("credit_cycle", "credit_ovc"))

    def __len__(self) -> int:
        return len(self.flit_cycle) + len(self.credit_cycle)

    def earliest(self) -> float:
        times = [a.min() for a in (self.flit_cycle, self.credit_cycle) if len(a)]
        return float(min(times)) if times else float("inf")

    def flit_count(self) -> int:
        return len(self.flit_cycle)

    def select(self, flit_mask: np.ndarray, credit_mask: np.ndarray) -> "FlitBoundary":
        return FlitBoundary(
            self.flit_cycle[flit_mask], self.flit_ivc[flit_mask], self.flit_pkt[flit_mask],
            self.flit_dst[flit_mask], self.flit_flag[flit_mask],
            self.credit_cycle[credit_mask], self.credit_ovc[credit_mask],
        )

    def sections(self) -> list[list[np.ndarray]]:
        return [[getattr(self, n) for n in sec] for sec in self.SECTIONS]

    @classmethod
    def from_sections(cls, sections: list[list[np.ndarray]]) -> "FlitBoundary":
        return cls(*sections[0], *sections[1])

    @classmethod
    def empty(cls) -> "FlitBoundary":
        return cls()

    @classmethod
    def concat(cls, parts: list["FlitBoundary"]) -> "FlitBoundary":
        parts = [b for b in parts if len(b)]
        if not parts:
            return cls()
        if len(parts) == 1:
            return parts[0]
        names = [n for sec in cls.SECTIONS for n in sec]
        return cls(*(np.concatenate([getattr(b, n) for b in parts]) for n in names))


def split_flits(out: FlitBoundary, owner: np.ndarray, vcs: int, shards: int) -> list[FlitBoundary]:
    """One FlitBoundary per destination shard (``owner[router]`` = shard)."""
    if not len(out):
        return [FlitBoundary() for _ in range(shards)]
    pv = PORTS * vcs
    fdst = owner[out.flit_ivc // pv]
    cdst = owner[out.credit_ovc // pv]
    return [out.select(fdst == s, cdst == s) for s in range(shards)]
