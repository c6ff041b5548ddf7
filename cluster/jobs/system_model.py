"""A system's shards as a ShardModel, and what each hands back: what a backend (a Ray actor
among them) runs of a system run.

Kept apart from the job (cluster/jobs/system.py) so that an actor unpickling it imports the
simulator only, not what writes the result tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cluster.parallel.epochs import idle_rule
from cluster.parallel.model import EpochMeta, Stop
from sim.system.config import SystemConfig
from sim.system.records import StepRecord
from sim.system.shard import SystemBoundary, SystemShard


def owners(cfg: SystemConfig, parts: list[list[int]]) -> np.ndarray:
    owner = np.zeros(cfg.graph.nodes, dtype=np.int64)
    for i, nodes in enumerate(parts):
        owner[nodes] = i
    return owner


class SystemModel:
    """System shards for the epoch loop of either backend."""

    def __init__(self, cfg: SystemConfig, parts: list[list[int]]):
        self.cfg = cfg
        self.parts = parts
        self.owner = owners(cfg, parts)
        self.horizon = cfg.max_cycles

    def build(self, region: list[int], index: int) -> SystemShard:
        s = self.cfg.level.shard(self.cfg, region, self.owner)
        if self.owner.max() > 0:
            s.watch_cut()
        return s

    def empty(self) -> SystemBoundary:
        return SystemBoundary()

    def concat(self, parts: list[SystemBoundary]) -> SystemBoundary:
        return SystemBoundary.concat(parts)

    def split(self, out: SystemBoundary, shards: int) -> list[SystemBoundary]:
        if not len(out):
            return [SystemBoundary() for _ in range(shards)]
        own = self.owner[out.node]
        return [out.select(own == s) for s in range(shards)]

    def stop(self, metas: list[EpochMeta]) -> Stop:
        return idle_rule(metas, self.horizon)

    def report(self, shard: SystemShard) -> "SystemResult":
        compute = {c: ch.compute_cycles for c, ch in shard.chips.items()}
        chips = {c: ch.result() for c, ch in shard.grid.items()}
        compute.update({c: r.compute_cycles for c, r in chips.items()})
        end = max([shard.now, *(r.end_cycle for r in chips.values())])
        return SystemResult(end, list(shard.records), np.array(shard.link_bytes, dtype=np.int64), shard.messages,
                            shard.bytes_sent, compute, chips, shard.counters())

    def in_transit(self, inbound: list[SystemBoundary]) -> int:
        return sum(b.flit_count() for b in inbound)

    def encode(self, b: SystemBoundary) -> list[list[np.ndarray]]:
        return b.sections()

    def decode(self, sections: list[list[np.ndarray]]) -> SystemBoundary:
        return SystemBoundary.from_sections(sections)

    @property
    def section_widths(self) -> tuple[int, ...]:
        return tuple(len(s) for s in SystemBoundary.SECTIONS)


@dataclass
class SystemResult:
    end_cycle: int
    records: list[StepRecord]
    link_bytes: np.ndarray  # bytes each link carried (links the shard owns)
    messages: int
    bytes_sent: int
    compute: dict[int, int]  # chip -> cycles computed
    chips: dict = field(default_factory=dict)  # grid fidelity: chip -> its ShardResult (sim/chip/report.py)
    work: tuple[int, int] = (0, 0)  # work items (collectives, stages, steps, requests) started and finished
