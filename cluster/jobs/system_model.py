"""A system's shards as a ShardModel: what a backend (a Ray actor among them) runs of a system run.

Kept apart from the job (cluster/jobs/system.py) so that an actor unpickling it imports the
simulator only, not what writes the result tables.
"""

from __future__ import annotations

import numpy as np

from cluster.parallel.epochs import idle_rule
from cluster.parallel.model import EpochMeta, Stop
from sim.system.config import SystemConfig
from sim.system.shard import SystemBoundary, SystemResult, SystemShard

__all__ = ["SystemModel", "SystemResult", "owners"]  # SystemResult: what each shard hands back (sim/system/shard.py)


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

    def split(self, out: SystemBoundary, shards: int) -> list[SystemBoundary]:
        if not len(out):
            return [SystemBoundary() for _ in range(shards)]
        own = self.owner[out.node]
        return [out.select((own == s, own == s)) for s in range(shards)]

    def stop(self, metas: list[EpochMeta]) -> Stop:
        return idle_rule(metas, self.horizon)
