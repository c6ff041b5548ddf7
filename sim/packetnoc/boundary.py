"""Packet heads crossing the cuts between shards of the packet-level NoC."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from sim.noc.ports import PORTS

_EMPTY = np.zeros(0, dtype=np.int64)


def _empty() -> np.ndarray:
    return _EMPTY


@dataclass
class PacketBoundary:
    """Heads crossing a shard cut: the cycle they bid at the downstream router, the global
    input-port id (router * PORTS + port) they arrive on, packet id, destination, flits."""

    cycle: np.ndarray = field(default_factory=_empty)
    port: np.ndarray = field(default_factory=_empty)
    pkt: np.ndarray = field(default_factory=_empty)
    dst: np.ndarray = field(default_factory=_empty)
    flits: np.ndarray = field(default_factory=_empty)

    SECTIONS: ClassVar[tuple[tuple[str, ...], ...]] = (("cycle", "port", "pkt", "dst", "flits"),)

    def __len__(self) -> int:
        return len(self.cycle)

    def earliest(self) -> float:
        return float(self.cycle.min()) if len(self.cycle) else float("inf")

    def flit_count(self) -> int:
        return int(self.flits.sum())

    def select(self, mask: np.ndarray) -> "PacketBoundary":
        return PacketBoundary(self.cycle[mask], self.port[mask], self.pkt[mask], self.dst[mask], self.flits[mask])

    def routers(self) -> np.ndarray:
        return self.port // PORTS

    def sections(self) -> list[list[np.ndarray]]:
        return [[getattr(self, n) for n in sec] for sec in self.SECTIONS]

    @classmethod
    def from_sections(cls, sections: list[list[np.ndarray]]) -> "PacketBoundary":
        return cls(*sections[0])

    @classmethod
    def empty(cls) -> "PacketBoundary":
        return cls()

    @classmethod
    def concat(cls, parts: list["PacketBoundary"]) -> "PacketBoundary":
        parts = [b for b in parts if len(b)]
        if not parts:
            return cls()
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(b, n) for b in parts]) for n in cls.SECTIONS[0]))


def split_packets(out: PacketBoundary, owner: np.ndarray, shards: int) -> list[PacketBoundary]:
    """One PacketBoundary per destination shard (``owner[router]`` = shard)."""
    if not len(out):
        return [PacketBoundary() for _ in range(shards)]
    own = owner[out.routers()]
    return [out.select(own == s) for s in range(shards)]
