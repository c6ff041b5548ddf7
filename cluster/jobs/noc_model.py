"""The NoC's shards as a ShardModel: what a backend (a Ray actor among them) runs of ``rdasim noc``.

Kept apart from the job (cluster/jobs/noc.py) so that an actor unpickling it imports the
simulator only, not what writes the result tables.
"""

from __future__ import annotations

import numpy as np

from cluster.parallel.epochs import stop_rule
from cluster.parallel.model import EpochMeta, Stop
from sim.noc.boundary import FlitBoundary
from sim.noc.params import NocParams
from sim.noc.shard import NocShard
from sim.noc.topology import Region


class NocModel:
    """The cycle-level NoC under synthetic traffic, measured as ``rdasim noc`` reports it."""

    def __init__(self, params: NocParams, owner: np.ndarray):
        self.p = params
        self.owner = owner
        self.measure_end = params.warmup_cycles + params.measure_cycles
        self.horizon = self.measure_end + params.drain_cycles

    def build(self, region: Region, index: int) -> NocShard:
        return self.watching(NocShard(self.p, region))

    def watching(self, shard):
        """``shard``, told who owns each router when the grid is cut (its earliest output)."""
        if self.owner.max() > 0:
            shard.watch_cut(self.owner)
        return shard

    def empty(self) -> FlitBoundary:
        return FlitBoundary()

    def split(self, out: FlitBoundary, shards: int) -> list[FlitBoundary]:
        return NocShard.split(out, self.owner, self.p, shards)

    def stop(self, metas: list[EpochMeta]) -> Stop:
        return stop_rule(metas, self.measure_end, self.horizon)
