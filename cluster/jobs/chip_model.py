"""The chip's shards as a ShardModel: what a backend (a Ray actor among them) runs of a chip run.

Kept apart from the job (cluster/jobs/chip.py) so that an actor unpickling it imports the
simulator only, not what writes the result tables (pyarrow's datasets, pandas: about a
second of every shard actor's start).
"""

from __future__ import annotations

import numpy as np

from cluster.jobs.grid import owner_map
from cluster.parallel.epochs import idle_rule
from cluster.parallel.model import EpochMeta, Stop
from sim.chip.messages import FIELDS
from sim.chip.shard import ChipBoundary, ChipShard
from sim.chip.spec import unit_layout
from sim.network import NETWORKS
from sim.workloads import make_program
from sim.workloads.serve.progress import Watched

_DST = FIELDS.index("dst")


class ChipModel:
    """Chip shards for the epoch loop of either backend."""

    def __init__(self, cfg, regions, sink=None):
        self.cfg = cfg
        self.sink = sink  # told how a program that can say goes (sim/workloads/serve/progress.py): this process's
        self.owner = owner_map(regions, cfg.spec.rows, cfg.spec.cols)
        self.unit_tile = unit_layout(cfg.spec).tile
        self.horizon = cfg.max_cycles
        self.net = NETWORKS.get(cfg.network)
        self.nothing = ChipBoundary(self.net.boundary())  # its network's traffic type inside

    def __getstate__(self) -> dict:
        return {**self.__dict__, "sink": None}  # an actor's shards tell no sink: it is in the driver's process

    def build(self, region, index: int) -> ChipShard:
        program = make_program(self.cfg.workload, self.cfg)
        s = ChipShard(self.cfg, region, program)
        if self.owner.max() > 0:
            s.watch_cut(self.owner)
        if self.sink is not None and isinstance(program, Watched):
            program.watch(self.sink)
        return s

    def empty(self) -> ChipBoundary:
        return self.nothing

    def split(self, out: ChipBoundary, shards: int) -> list[ChipBoundary]:
        if not len(out):
            return [self.nothing] * shards
        nets = self.net.split(out.net, self.owner, self.cfg.noc, shards)
        mown = self.owner[self.unit_tile[out.msgs[:, _DST]]] if len(out.msgs) else np.zeros(0, dtype=np.int64)
        pown = self.owner[out.pkt_tile] if len(out.pkt) else np.zeros(0, dtype=np.int64)
        res = []
        for s in range(shards):
            pm = pown == s
            res.append(ChipBoundary(nets[s], out.msgs[mown == s], out.pkt[pm], out.pkt_msg[pm], out.pkt_tile[pm]))
        return res

    def stop(self, metas: list[EpochMeta]) -> Stop:
        return idle_rule(metas, self.horizon)
