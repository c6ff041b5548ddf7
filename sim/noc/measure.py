"""What a NoC shard measures, kept the same way by both models (composition).

BookSim2's definitions: packets created in the measurement window [warm-up, warm-up +
measure) are measured; a packet id is ``creation cycle * nodes + source``. The arrays are
plain int64 so the compiled kernels update them in place:

- ``cycles[CREATED_ROW, c]`` flits created at cycle ``c``; ``cycles[EJECTED_ROW, c]`` flits
  that reached their terminal at ``c`` (the packet model stores differences there and
  sums them in its report);
- ``by_src[row, node]`` flits each source created / had ejected inside the window;
- ``links[row, link]`` flits over each output link inside the window / over the whole run;
- ``rec[kind, i, :]`` records: injections (packet, destination, cycle the head left the
  source), measured ejections (packet, tail cycle), deliveries for ``take_ejected``
  (packet, tail cycle), ``sc[N_INJ + kind]`` rows each;
- ``sc`` scalars: measured packets created / ejected, flit latency sum and count, hops.

A kernel takes the arrays as ``MeasureTables`` and never writes past a buffer's end: it
checks the free rows and the length of ``cycles`` before a step and returns to Python,
which calls ``make_room`` or ``grow_cycles`` and resumes it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sim.noc.jit import inline
from sim.noc.params import NocParams

# scalar slots of Measurement.sc
CREATED, EJECTED, LAT_SUM, LAT_COUNT, HOPS, N_INJ, N_EJ, N_DLV = range(8)
# record kinds (first index of Measurement.rec)
INJ, EJ, DLV = range(3)
# rows of Measurement.cycles and .by_src; rows of Measurement.links
CREATED_ROW, EJECTED_ROW = 0, 1
WINDOW_ROW, TOTAL_ROW = 0, 1

_EMPTY = np.zeros(0, dtype=np.int64)


class MeasureTables(NamedTuple):
    """The measurement as a kernel takes it (as a plain tuple: sim/noc/kernel.py's ``Tables``)."""

    sc: np.ndarray
    cycles: np.ndarray
    by_src: np.ndarray
    links: np.ndarray
    rec: np.ndarray


@inline
def append(sc, rec, kind, a, b, c):
    """In a kernel: add the row (a, b, c) to record buffer ``kind`` (room checked before)."""
    k = sc[N_INJ + kind]
    rec[kind, k, 0] = a
    rec[kind, k, 1] = b
    rec[kind, k, 2] = c
    sc[N_INJ + kind] = k + 1


class Measurement:
    """Window statistics, packet records and delivered packets of one shard."""

    def __init__(self, p: NocParams, links: int, cycles: int):
        self.w0 = p.warmup_cycles
        self.w1 = p.warmup_cycles + p.measure_cycles
        self.horizon = self.w1 + p.drain_cycles
        self.pkt_lo, self.pkt_hi = self.w0 * p.nodes, self.w1 * p.nodes
        self.sc = np.zeros(8, dtype=np.int64)
        self.cycles = np.zeros((2, cycles), dtype=np.int64)
        self.by_src = np.zeros((2, p.nodes), dtype=np.int64)
        self.links = np.zeros((2, links), dtype=np.int64)
        self.rec = np.zeros((3, 256, 3), dtype=np.int64)
        self._inj: list[np.ndarray] = []  # records moved out of a full buffer
        self._ej: list[np.ndarray] = []
        self.kernel_tables: tuple = ()  # MeasureTables as a plain tuple, kept as the arrays change
        self._replaced()

    def _replaced(self) -> None:
        self.kernel_tables = tuple(MeasureTables(sc=self.sc, cycles=self.cycles, by_src=self.by_src,
                                                 links=self.links, rec=self.rec))

    def grow_cycles(self, n: int) -> None:
        """Make ``cycles`` at least ``n + 1`` long (doubling, so growth is amortised)."""
        if n >= self.cycles.shape[1]:
            size = max(n + 1, 2 * self.cycles.shape[1])
            grown = np.zeros((2, size), dtype=np.int64)
            grown[:, : self.cycles.shape[1]] = self.cycles
            self.cycles = grown
            self._replaced()

    def make_room(self, rows: int) -> None:
        """At least ``rows`` free rows in every record buffer: grow the delivery buffer
        (the caller empties it), move full window records out of the way."""
        cap = self.rec.shape[1]
        for kind, slot, keep in ((INJ, N_INJ, self._inj), (EJ, N_EJ, self._ej)):
            n = int(self.sc[slot])
            if n + rows > cap and n >= cap // 2:
                keep.append(self.rec[kind, :n].copy())
                self.sc[slot] = 0
        need = int(self.sc[N_INJ:N_DLV + 1].max()) + rows
        if need > cap:
            grown = np.zeros((3, max(need, 2 * cap), 3), dtype=np.int64)
            grown[:, :cap] = self.rec
            self.rec = grown
            self._replaced()

    def _records(self, kind: int, slot: int, kept: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(kept + [self.rec[kind, : int(self.sc[slot])]])

    def take_ejected(self) -> tuple[np.ndarray, np.ndarray]:
        """(packet ids, cycles their tails reached the destination terminal) since the last
        call; the shard must have been built with record_ejections."""
        n = self.sc.item(N_DLV)
        if not n:
            return _EMPTY, _EMPTY
        d = self.rec[DLV, :n]
        self.sc[N_DLV] = 0
        return d[:, 0].copy(), d[:, 1].copy()

    def counters(self) -> tuple[int, int]:
        """(measured packets created, measured packets whose tail has been ejected)."""
        return int(self.sc[CREATED]), int(self.sc[EJECTED])

    def fields(self) -> dict:
        """The NocReport fields both models measure the same way."""
        inj = self._records(INJ, N_INJ, self._inj)
        ej = self._records(EJ, N_EJ, self._ej)
        return dict(
            created_flits=self.cycles[CREATED_ROW].copy(),
            inject_pkt=inj[:, 0], inject_dst=inj[:, 1], inject_cycle=inj[:, 2],
            eject_pkt=ej[:, 0], eject_cycle=ej[:, 1],
            flit_latency_sum=int(self.sc[LAT_SUM]),
            flit_latency_count=int(self.sc[LAT_COUNT]),
            measured_hops=int(self.sc[HOPS]),
            window_created_by_src=self.by_src[CREATED_ROW].copy(),
            window_ejected_by_src=self.by_src[EJECTED_ROW].copy(),
        )
