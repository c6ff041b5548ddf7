"""A chip of a system at grid fidelity: its whole CU/MU grid and NoC behind its IO units.

The chip is a chip shard (sim/chip/shard.py) covering the whole grid, running the
chip workload's program with its place in the system (``ChipConfig.system``). Messages
its units send to other chips leave by the IO units (sim/chip/io.py) and enter the
chip network at the cycle the IO unit hands them over; messages from other chips enter
by the IO unit of the dimension they arrive on, at their tail's arrival.

The system shard advances each of its grid chips through an epoch before it moves the
network: an epoch is at most the least latency of any link, so nothing a chip hands
over in an epoch reaches another chip within it, and every arrival due in an epoch is
known when the epoch starts.
"""

from __future__ import annotations

import numpy as np

from sim.chip.config import NI_LATENCY, ChipConfig
from sim.chip.messages import Message
from sim.chip.report import ShardResult
from sim.chip.shard import ChipShard
from sim.chip.spec import unit_layout
from sim.noc.topology import Region


class GridChip:
    """One grid-fidelity chip of a system shard."""

    def __init__(self, cid: int, cfg: ChipConfig):
        self.cid = cid
        self.cfg = cfg
        spec = cfg.spec
        # the program every CU runs, asked of the workload as sim/chip/program.py declares it
        self.shard = ChipShard(cfg, Region(0, spec.rows, 0, spec.cols), cfg.workload.program(cfg))
        lay = unit_layout(spec, cfg.io_ports)
        self.io = lay.ios.tolist()  # IO unit of each network dimension
        self.io_tiles = sorted({int(lay.tile[u]) for u in self.io})
        self._shift: float | None = None  # watch_io's correction (None: no bound, the chip may hand over now)

    def watch_io(self) -> None:
        """Get ready for ``earliest_hand_over``: the chip's NoC bounds its traffic towards the IO
        tiles as towards another shard's routers (sim/noc/cut.py), the IO tiles a region of their own."""
        tiles = self.cfg.spec.tiles
        if not self.io_tiles or 0 in self.io_tiles:  # the cut tables take the region of tile 0 as the chip's own
            return
        owner = np.zeros(tiles, dtype=np.int64)
        owner[self.io_tiles] = 1
        self.shard.watch_cut(owner)
        local = {int(t): i for i, t in enumerate(self.shard.my_tiles.tolist())}
        reach = self.shard.net.offer_reach()
        # a unit's event at c counts as reaching the IO tiles at c + NI_LATENCY + the NoC's least
        # reach from its tile, at least this much after c even for an IO unit itself (0 hops), which
        # may hand a message over at its event's cycle: so much earlier it may come
        self._shift = NI_LATENCY + float(min(reach[local[t], 1] for t in self.io_tiles))

    def earliest_hand_over(self) -> float:
        """The earliest cycle an IO unit could hand a message to the chip network: a unit with a
        pending event sends at that cycle at the earliest, its packets cross the NoC to an IO tile
        at every hop's least delay, and a packet already in the NoC reaching a unit makes it send
        NI_LATENCY later (``watch_io`` first; without it, the chip's current cycle)."""
        if self._shift is None:
            return float(self.shard.t)
        return float(self.shard.earliest_output()[1]) - self._shift

    def advance(self, t0: int, t1: int) -> list[Message]:
        """Simulate [t0, t1): the messages its IO units handed to the chip network (``sent``: when)."""
        self.shard.advance(t0, t1)
        out, self.shard.left_chip = self.shard.left_chip, []
        return out

    def arrive(self, cycle: int, dim: int, row: tuple) -> None:
        """A message (a FIELDS row) reaches this chip's IO unit of ``dim`` at ``cycle``."""
        self.shard.enter_chip(cycle, self.io[dim], Message(*row))

    def next_event(self) -> float:
        return self.shard.next_event()

    def counters(self) -> tuple[int, int]:
        return self.shard.counters()

    def result(self) -> ShardResult:
        return self.shard.report()
