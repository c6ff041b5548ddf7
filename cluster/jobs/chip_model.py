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
from sim.chip.report import shard_result
from sim.chip.shard import ChipBoundary, ChipShard
from sim.chip.spec import unit_layout
from sim.network import NETWORKS
from sim.workloads import make_program

_DST = FIELDS.index("dst")
_NF = len(FIELDS)


class ChipModel:
    """Chip shards for the epoch loop of either backend."""

    def __init__(self, cfg, regions):
        self.cfg = cfg
        self.owner = owner_map(regions, cfg.spec.rows, cfg.spec.cols)
        self.unit_tile = unit_layout(cfg.spec).tile
        self.horizon = cfg.max_cycles
        self.net = NETWORKS.get(cfg.network)
        self.net_sections = self.net.boundary.SECTIONS

    def build(self, region, index: int) -> ChipShard:
        s = ChipShard(self.cfg, region, make_program(self.cfg.workload, self.cfg))
        if self.owner.max() > 0:
            s.watch_cut(self.owner)
        return s

    def empty(self) -> ChipBoundary:
        return ChipBoundary(self.net.boundary.empty())

    def concat(self, parts: list[ChipBoundary]) -> ChipBoundary:
        parts = [p for p in parts if len(p)]
        if not parts:
            return self.empty()
        if len(parts) == 1:
            return parts[0]
        return ChipBoundary(self.net.boundary.concat([p.net for p in parts]), np.concatenate([p.msgs for p in parts]),
                            *(np.concatenate([getattr(p, n) for p in parts]) for n in ("pkt", "pkt_msg", "pkt_tile")))

    def split(self, out: ChipBoundary, shards: int) -> list[ChipBoundary]:
        if not len(out):
            return [self.empty() for _ in range(shards)]
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

    def report(self, shard: ChipShard):
        return shard_result(shard)

    def in_transit(self, inbound: list[ChipBoundary]) -> int:
        return sum(b.net.flit_count() for b in inbound)

    @property
    def section_widths(self) -> tuple[int, ...]:
        return tuple(len(s) for s in self.net_sections) + (_NF, 3)

    def encode(self, b: ChipBoundary) -> list[list[np.ndarray]]:
        net = b.net.sections()
        msgs = [np.ascontiguousarray(b.msgs[:, i]) for i in range(_NF)]
        return net + [msgs, [b.pkt, b.pkt_msg, b.pkt_tile]]

    def decode(self, sections: list[list[np.ndarray]]) -> ChipBoundary:
        k = len(self.net_sections)
        net = self.net.boundary.from_sections(sections[:k])
        msgs = np.stack(sections[k], axis=1) if len(sections[k][0]) else np.zeros((0, _NF), dtype=np.int64)
        return ChipBoundary(net, msgs, *sections[k + 1])
