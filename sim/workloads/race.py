"""race: the smallest scenario in which a -1 overtakes a +1 through the NoC.

Three units take part: a producer CU P, a consumer CU C and the MU M holding the
buffer. Each trial P allocates a buffer at M, writes it, and copies its reference to
C; C drops the copy at once; after ``hold_cycles`` P reads its buffer (a use) and
drops its own reference. Background traffic makes the +1's path slow: the
``jammers`` (MUs) each stream ``jam_bytes`` into M, triggered ``lead_cycles`` before
the copy. With the default placement (P above M in M's column, C in M's row, jammers
whose XY routes come down M's column through P's router) the +1 queues behind the jam
while the copy and C's -1 take the free row. Under ``refcount`` the -1 can then reach
M first: the count drops to zero and M frees a buffer P still holds; P's +1, read and
-1 then operate on freed memory (use after free, double free). ``refcount-gated`` and
``partial-free`` never let that happen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sim.chip import messages as m
from sim.chip.records import buffer_label
from sim.chip.references import allocate, drop, received, share
from sim.chip.spec import CU, MU
from sim.chip.units import Replies, Sleep
from sim.keys import Field, Issue, Table
from sim.workloads import WORKLOADS, ChipContext, Workload
from sim.workloads.base import Floorplan, tile_field, tile_of
from sim.workloads.capabilities import Capabilities

RACE_BUFFER = buffer_label(4, "race")


@WORKLOADS.register("race")
@dataclass(frozen=True)
class RaceParams(Workload):
    kind: str = "race"
    trials: int = 4
    producer: tuple[int, int] = (2, 4)  # (row, col) of each unit's tile
    consumer: tuple[int, int] = (5, 1)
    memory: tuple[int, int] = (5, 4)
    jammers: tuple[tuple[int, int], ...] = ((2, 1), (2, 3), (0, 3), (1, 4))
    jam_bytes: int = 16384
    lead_cycles: int = 300
    hold_cycles: int = 400
    gap_cycles: int = 2000
    data_bytes: int = 256

    SECTION: ClassVar[str] = "race"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=False)
    WORK_UNIT: ClassVar[str] = "trials"
    token_unit: ClassVar[str] = "trials"  # completed trials
    KEYS: ClassVar[Table]

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "RaceParams":
        spec, lay = chip.spec, chip.layout
        p = tile_of(d["producer"], "workload.race.producer", spec, lay, CU, issues)
        c = tile_of(d["consumer"], "workload.race.consumer", spec, lay, CU, issues)
        mem = tile_of(d["memory"], "workload.race.memory", spec, lay, MU, issues)
        jams = [tile_of(j, f"workload.race.jammers[{i}]", spec, lay, MU, issues) for i, j in enumerate(d["jammers"])]
        if p and c and p == c:
            issues.append(Issue("workload.race.consumer", "must differ from the producer"))
        return cls(trials=d["trials"], producer=p or (0, 0), consumer=c or (0, 0), memory=mem or (0, 1),
                   jammers=tuple(j for j in jams if j), jam_bytes=d["jam_bytes"], lead_cycles=d["lead_cycles"],
                   hold_cycles=d["hold_cycles"], gap_cycles=d["gap_cycles"], data_bytes=d["data_bytes"])

    @property
    def work_items(self) -> int:
        return self.trials

    def program(self, cfg) -> "Race":
        return Race(self, cfg)


def _keys(d: RaceParams) -> Table:
    def cycles(doc, default):
        return Field("int", default, doc, min=0, unit="cycles")

    return Table({
        "trials": Field("int", d.trials, "repetitions of the scenario", min=1),
        "producer": tile_field(list(d.producer), "[row, col] of the producer CU"),
        "consumer": tile_field(list(d.consumer), "[row, col] of the consumer CU"),
        "memory": tile_field(list(d.memory), "[row, col] of the MU holding the buffer"),
        "jammers": Field("list", [list(j) for j in d.jammers], "[row, col] of each MU streaming into the MU",
                         item=Field("list", item=Field("int", min=0))),
        "jam_bytes": Field("size", d.jam_bytes, "bytes each jammer streams per trial", min=0),
        "lead_cycles": cycles("cycles between starting the jam and copying the reference", d.lead_cycles),
        "hold_cycles": cycles("cycles the producer holds its reference before using it", d.hold_cycles),
        "gap_cycles": cycles("idle cycles between trials", d.gap_cycles),
        "data_bytes": Field("size", d.data_bytes, "size of the shared buffer", min=1),
    }, doc="race")


RaceParams.KEYS = _keys(RaceParams())


class Race:
    def __init__(self, p: RaceParams, cfg):
        self.p = p
        self.cfg = cfg
        g = self.grid = Floorplan(cfg)
        self.producer = g.unit_at(*p.producer)
        self.consumer = g.unit_at(*p.consumer)
        self.memory = g.unit_at(*p.memory)
        self.jammers = [g.unit_at(*j) for j in p.jammers]

    def start(self, cu):
        return self._trials(cu) if cu.uid == self.producer else None

    def on_message(self, cu, msg):
        if msg.kind == m.REFERENCE and cu.uid == self.consumer:
            return self._consume(cu, msg)
        raise RuntimeError(f"race CU {cu.uid} got an unexpected {m.KINDS[msg.kind]} message")

    def _trials(self, cu):
        p, shard, reclaim = self.p, cu.shard, self.cfg.reclaim
        for trial in range(p.trials):
            t0 = shard.now
            shard.counts["admitted"] += 1
            ref = yield from allocate(cu, self.memory, p.data_bytes, RACE_BUFFER)
            if ref is None:
                shard.counts["finished"] += 1
                shard.record("request", trial, t0, shard.now, 0, "failed")
                continue
            cu.send(m.WRITE, ref.mu, nbytes=p.data_bytes, arg=0, mu=ref.mu, buf=ref.buf, alloc=ref.alloc)
            for j in self.jammers:
                cu.send(m.CONTROL, j, arg=m.CTRL_STREAM, buf=self.memory, nbytes=p.jam_bytes)
            yield Sleep(p.lead_cycles)
            yield from share(cu, [ref], [[self.consumer]], reclaim, [[trial]])
            yield Sleep(p.hold_cycles)
            tag = cu.request(m.READ_REQ, ref.mu, nbytes=p.data_bytes, mu=ref.mu, buf=ref.buf, alloc=ref.alloc)
            yield Replies([tag], "memory")
            drop(cu, ref, reclaim)
            shard.counts["finished"] += 1
            shard.record("request", trial, t0, shard.now, 1, "ok")
            yield Sleep(p.gap_cycles)

    def _consume(self, cu, msg):
        drop(cu, received(cu, msg), self.cfg.reclaim)
        return None
