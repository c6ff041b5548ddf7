"""The packets a shard's nodes create: synthetic (Bernoulli) traffic and scripted packets.

Both NoC models take their packets from a ``TrafficSource`` (composition, one
implementation). Synthetic creations (traffic.creations) are generated a chunk of cycles
at a time; chunks tile time from cycle 0, so a node's packets never depend on how the
run is cut into epochs or shards. Scripted packets are the ones a caller ``offer``s (the
chip's messages); they are kept sorted by (cycle, node).

The arrays are plain int64 columns that a compiled kernel reads directly
(``SourceTables``); ``cursor`` holds the positions the kernel has consumed up to
(``CRE_POS``, ``SCR_POS``). A kernel that needs the next chunk returns to Python, which
calls ``new_chunk`` and resumes it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sim.noc import script
from sim.noc.params import NocParams
from sim.noc.traffic import creations

CHUNK = 512  # cycles of synthetic creations generated at a time (at most ~1M draws)
CRE_POS, SCR_POS = 0, 1  # cursor slots


class SourceTables(NamedTuple):
    """The packets as a kernel takes them (as a plain tuple: sim/noc/kernel.py's ``Tables``)."""

    cre: np.ndarray  # the current synthetic chunk: cycle, local node, destination
    scr: np.ndarray  # scripted packets, sorted: cycle, local node, destination, flits
    cursor: np.ndarray  # how far the kernel has taken each (CRE_POS, SCR_POS)


class TrafficSource:
    """Synthetic and scripted packets of the routers ``routers`` (global ids, local order)."""

    def __init__(self, p: NocParams, routers: np.ndarray, local_of: np.ndarray, horizon: int):
        self.p = p
        self.routers = routers
        self.local_of = local_of
        self.horizon = horizon  # synthetic chunks that start after it are only made on demand
        self.chunk_cycles = max(16, min(CHUNK, (1 << 20) // len(routers)))
        self.cre = np.zeros((3, 0), dtype=np.int64)  # current chunk: cycle, local node, destination
        self.chunk_end = 0
        self.scr = np.zeros((4, 0), dtype=np.int64)  # scripted: cycle, local node, destination, flits
        self.cursor = np.zeros(2, dtype=np.int64)
        self.kernel_tables: tuple = ()  # SourceTables as a plain tuple, kept as the arrays change
        self._replaced()

    @property
    def synthetic(self) -> bool:
        return self.p.packet_rate > 0

    def new_chunk(self) -> None:
        """Replace the current chunk by the next one in time."""
        start = self.chunk_end
        end = start + self.chunk_cycles
        cyc, src, dst = creations(self.p, self.routers, start, end)
        self.cre = np.stack((cyc, self.local_of[src], dst))
        self.cursor[CRE_POS] = 0
        self.chunk_end = end
        self._replaced()

    def more_chunks(self) -> bool:
        """Whether a next chunk is due before the horizon (after it, only on demand)."""
        return self.synthetic and self.chunk_end <= self.horizon

    def next_creation(self) -> float:
        """Earliest synthetic creation not yet taken, making chunks up to the horizon."""
        while True:
            pos = int(self.cursor[CRE_POS])
            if pos < self.cre.shape[1]:
                return float(self.cre[0, pos])
            if not self.more_chunks():
                return float("inf")
            self.new_chunk()

    def next_scripted(self) -> float:
        pos = self.cursor.item(SCR_POS)
        return float(self.scr.item(0, pos)) if pos < self.scr.shape[1] else float("inf")

    def offer(self, now: int, cycles, src, dst, flits=None) -> None:
        """Script packets: ``src`` (global router ids of this shard) creates a packet to
        ``dst`` of ``flits`` flits at each cycle. At most one packet per node per cycle,
        counting the synthetic ones; cycles must not lie before ``now``."""
        cycles = np.ascontiguousarray(cycles, dtype=np.int64)
        src = np.ascontiguousarray(src, dtype=np.int64)
        dst = np.ascontiguousarray(dst, dtype=np.int64)
        flits = (np.full(len(cycles), self.p.packet_flits, dtype=np.int64) if flits is None
                 else np.ascontiguousarray(flits, dtype=np.int64))
        n = len(cycles)
        old = self.scr[:, int(self.cursor[SCR_POS]):]
        new = np.empty((4, n), dtype=np.int64)
        merged = np.empty((4, old.shape[1] + n), dtype=np.int64)
        why, at = script.merge(now, cycles, src, dst, flits, self.local_of, self.p.nodes, old, new, merged)
        if why == script.BEFORE_NOW:
            raise ValueError(f"cannot offer packets at cycle {cycles.min()}: shard is at cycle {now}")
        if why == script.NOT_LOCAL:
            raise ValueError("offered packets must start at routers of this shard")
        if why == script.OUT_OF_GRID:
            raise ValueError("offered packets need destinations inside the grid and at least one flit")
        if why == script.TWICE:
            raise ValueError(f"two packets offered at router {self.routers[merged[1, at]]} in cycle {merged[0, at]}: "
                             "a node creates at most one packet a cycle")
        self.scr = merged
        self.cursor[SCR_POS] = 0
        self._replaced()

    def _replaced(self) -> None:
        self.kernel_tables = tuple(SourceTables(cre=self.cre, scr=self.scr, cursor=self.cursor))
