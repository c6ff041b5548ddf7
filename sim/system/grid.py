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

from sim.chip.config import ChipConfig
from sim.chip.messages import Message
from sim.chip.report import ShardResult, shard_result
from sim.chip.shard import ChipShard
from sim.chip.spec import unit_layout
from sim.noc.topology import Region
from sim.workloads import make_program


class GridChip:
    """One grid-fidelity chip of a system shard."""

    def __init__(self, cid: int, cfg: ChipConfig):
        self.cid = cid
        self.cfg = cfg
        spec = cfg.spec
        self.shard = ChipShard(cfg, Region(0, spec.rows, 0, spec.cols), make_program(cfg.workload, cfg))
        self.io = unit_layout(spec, cfg.io_ports).ios.tolist()  # IO unit of each network dimension

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
        return shard_result(self.shard)
