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
from sim.workloads.serve.progress import Watched

__all__ = ["SystemModel", "SystemResult", "owners"]  # SystemResult: what each shard hands back (sim/system/shard.py)


def owners(cfg: SystemConfig, parts: list[list[int]]) -> np.ndarray:
    owner = np.zeros(cfg.graph.nodes, dtype=np.int64)
    for i, nodes in enumerate(parts):
        owner[nodes] = i
    return owner


class SystemModel:
    """System shards for the epoch loop of either backend."""

    def __init__(self, cfg: SystemConfig, parts: list[list[int]], sink=None):
        self.cfg = cfg
        self.sink = sink  # told how a program that can say goes (sim/workloads/serve/progress.py): this process's
        self.parts = parts
        self.owner = owners(cfg, parts)
        self.horizon = cfg.max_cycles

    def build(self, region: list[int], index: int) -> SystemShard:
        s = self.cfg.level.shard(self.cfg, region, self.owner)
        if self.owner.max() > 0:
            s.watch_cut()
        if self.sink is not None and isinstance(s.program, Watched):
            s.program.watch(self.sink)
        return s

    def __getstate__(self) -> dict:
        return {**self.__dict__, "sink": None}  # an actor's shards tell no sink: it is in the driver's process

    def empty(self) -> SystemBoundary:
        return SystemBoundary()

    def split(self, out: SystemBoundary, shards: int) -> list[SystemBoundary]:
        if not len(out):
            return [SystemBoundary() for _ in range(shards)]
        own = self.owner[out.node]
        return [out.select((own == s, own == s)) for s in range(shards)]

    def stop(self, metas: list[EpochMeta]) -> Stop:
        return idle_rule(metas, self.horizon)
