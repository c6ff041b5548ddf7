"""Complete lifetime-conflict checker for physical tiles.

Two logical tiles conflict when they are live at a common time step and their physical
tiles share at least one (partition, byte) cell of the same memory. Unlike the vendor's
checker (documented as incomplete), every such pair is reported: a sweep in start-time
order tests each tile against every tile still live, vectorised over that live set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from allocators.errors import InputError
from allocators.tiles import PhysicalTile


@dataclass(frozen=True)
class LiveTile:
    """A physical tile and the half-open time interval [start, end) its logical tile is live."""

    tile: PhysicalTile
    start: int
    end: int


@dataclass(frozen=True)
class Conflict:
    """Two logical tiles live together on shared memory cells: which, when, and where."""

    first: PhysicalTile
    second: PhysicalTile
    time: tuple[int, int]        # [from, to): both live
    partitions: tuple[int, int]  # [from, to): shared partitions
    bytes: tuple[int, int]       # [from, to): shared bytes in each of those partitions

    def describe(self) -> str:
        a, b = self.first, self.second
        return (f"{a.memory}: {a.tensor}{list(a.index)} and {b.tensor}{list(b.index)} both live in "
                f"[{self.time[0]}, {self.time[1]}) on partitions [{self.partitions[0]}, {self.partitions[1]}) "
                f"bytes [{self.bytes[0]}, {self.bytes[1]})")


def find_conflicts(live: Sequence[LiveTile]) -> list[Conflict]:
    """Every conflicting pair, ordered by the later tile's start time then input order."""
    for lt in live:
        if lt.end <= lt.start:
            raise InputError(f"tile {lt.tile.tensor}{list(lt.tile.index)}: live interval "
                             f"[{lt.start}, {lt.end}) is empty")
    n = len(live)
    if n < 2:
        return []
    start = np.array([lt.start for lt in live], dtype=np.int64)
    end = np.array([lt.end for lt in live], dtype=np.int64)
    p0 = np.array([lt.tile.start_partition for lt in live], dtype=np.int64)
    p1 = p0 + np.array([lt.tile.partitions for lt in live], dtype=np.int64)
    b0 = np.array([lt.tile.byte_addr for lt in live], dtype=np.int64)
    b1 = b0 + np.array([lt.tile.size for lt in live], dtype=np.int64)
    memories = {m: i for i, m in enumerate(sorted({lt.tile.memory for lt in live}))}
    mem = np.array([memories[lt.tile.memory] for lt in live], dtype=np.int64)
    order = np.lexsort((np.arange(n), start))
    out: list[Conflict] = []
    active = np.zeros(0, dtype=np.int64)  # tiles started earlier and still live
    for j in order:
        active = active[end[active] > start[j]]  # half-open: ending at start[j] is no overlap
        hits = active[(mem[active] == mem[j]) & (p0[active] < p1[j]) & (p0[j] < p1[active])
                      & (b0[active] < b1[j]) & (b0[j] < b1[active])]
        for i in hits:
            out.append(Conflict(
                live[i].tile, live[j].tile,
                (int(max(start[i], start[j])), int(min(end[i], end[j]))),
                (int(max(p0[i], p0[j])), int(min(p1[i], p1[j]))),
                (int(max(b0[i], b0[j])), int(min(b1[i], b1[j])))))
        active = np.append(active, j)
    return out
