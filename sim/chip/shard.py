"""One shard of the chip: the tiles (routers and units) of a rectangle of the grid.

``ChipShard.advance(t0, t1, inbound)`` simulates cycles [t0, t1) and returns what
leaves the shard: the network's boundary traffic plus the records of messages whose
destination lies in another shard (a message's record travels at the end of the epoch
it was sent in; its packets need more than an epoch to cross a cut, so the record is
always there first). Like the NoC shard it knows nothing of Ray.

Inside an epoch the units and the network take turns. The network has served every
event before ``t``, so every delivery before ``t + flit_delay`` is known (a packet
granted at s >= t arrives at s + flit_delay or later): the units handle their events
before that (queueing packets from the next cycle on). Then the network runs up to the
first cycle a unit could offer a packet at: one past the units' next event, or one past
the first tail it ejects meanwhile (a model that can stop there, ``StopsAtEjection``;
another advances at most ``flit_delay + NI_LATENCY`` cycles). Nothing is ever offered
in the past and no delivery is missed, so the windows' lengths change nothing.
Same-cycle events at a unit are ordered by (cycle,
class: deliveries before timers, unit, message id or the unit's own sequence); a
unit's behaviour depends only on its own event sequence, which is therefore the same
for any shard count, cut and backend.

Each tile has one network interface shared by its unit and any DRAM interface unit on
it: it offers at most one packet per cycle, each packet in the first free cycle at or
after the cycle it is ready (packet ids are ``cycle * tiles + tile``).
"""

from __future__ import annotations

import gc
import heapq
from contextlib import contextmanager

import numpy as np

from sim import rng
from sim.chip import messages as m
from sim.chip.config import NI_LATENCY, ChipConfig
from sim.chip.digest import Digest, code
from sim.chip.dram import DramUnit
from sim.chip.interface import Interfaces
from sim.chip.io import IoUnit
from sim.chip.memory_unit import MemoryUnit
from sim.chip.occupancy import Occupancy
from sim.chip.program import Program
from sim.chip.records import BufferLife, WorkRecord
from sim.chip.report import ShardResult, shard_result
from sim.chip.rows import Rows
from sim.chip.spec import CU, DRAM, MU, home_drams, unit_layout
from sim.chip.tier_controller import TierUnit
from sim.chip.units import ComputeUnit, Unit
from sim.memory import oracle
from sim.network import NETWORKS, NetBoundary, StopsAtEjection
from sim.noc.topology import Region
from sim.traffic import Columnar, column, matrix, part

_E = np.zeros(0, dtype=np.int64)
NF = len(m.FIELDS)
STREAM_JITTER = 101  # rng stream ids of the chip (sim/rng.py uses 1..3 for the NoC)
DELIVERY, TIMER = 0, 1
_DATA_KINDS = frozenset({m.WRITE, m.APPEND, m.READ_RESP})  # messages whose data adds to their packets
SIZES_KEPT = 4096  # message sizes whose packets' flits send keeps (forgotten all at once past this)


class ChipBoundary(Columnar):
    """Network traffic crossing cuts, plus message records and packet->message maps."""

    net: NetBoundary = part()  # the NoC model's own boundary traffic
    msgs: np.ndarray = matrix(m.FIELDS)  # [n, NF] rows of messages.FIELDS
    pkt: np.ndarray = column("packets")  # packet id -> message id, destination tile
    pkt_msg: np.ndarray = column("packets")
    pkt_tile: np.ndarray = column("packets")


@contextmanager
def _no_cycle_collection():
    """Python's cyclic garbage collector paused, as it was again after. A shard's run makes
    millions of short-lived objects (messages, events, their heap rows) that reference counting
    frees, and almost no cycles (about 400 in a whole-chip anchor of 0.8 M messages); the
    collector, woken every 700 allocations and now and then scanning the whole heap (the
    compiled plan's with it), took about a tenth of such a run's CPU time finding them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class ChipShard:
    def __init__(self, cfg: ChipConfig, region: Region, workload: Program) -> None:
        self.cfg = cfg
        self.region = region
        spec = cfg.spec
        self.lay = lay = unit_layout(spec, cfg.io_ports)
        self.tiles = spec.tiles
        network = NETWORKS.get(cfg.network)
        self.net = network(cfg.noc, region, record_ejections=True, measure=False)
        self._no_net = network.boundary()  # what the network sends nobody: joined with what it sends
        # the network again when it can stop at an ejection: longer windows (advance)
        self._stopping: StopsAtEjection | None = self.net if isinstance(self.net, StopsAtEjection) else None
        self.my_tiles = region.routers(spec.cols)
        mine = np.zeros(self.tiles, dtype=bool)
        mine[self.my_tiles] = True
        self.mine = mine
        self._mine = mine.tolist()  # per tile, as send reads it once a message
        self._tile_of = self.lay.tile.tolist()
        self.workload = workload
        self.now = 0
        self.t = 0
        self.net_delay = cfg.noc.flit_delay
        self.heap: list = []
        self.units: dict[int, Unit] = {}
        home_dram = home_drams(spec, lay)
        for uid in np.flatnonzero(mine[lay.tile]).tolist():
            kind, tile = int(lay.kind[uid]), int(lay.tile[uid])
            u: Unit
            if kind == CU:
                u = ComputeUnit(uid, tile, self, workload)
            elif kind == MU:
                u = MemoryUnit(uid, tile, self, cfg, int(home_dram[uid]))
            elif kind == DRAM and (spec.tiers or cfg.bulk == "flows"):
                u = TierUnit(uid, tile, self, cfg, uid - spec.tiles)
            elif kind == DRAM:
                u = DramUnit(uid, tile, self, cfg)
            else:
                u = IoUnit(uid, tile, self)
            self.units[uid] = u
        # a data message to a memory whose transfers are flows: its packets carry the header only
        self.flow_ids = frozenset(lay.drams.tolist() if spec.tiers or cfg.bulk == "flows" else ())
        # the tiles' network interfaces: the cycles they offer packets in, the packets booked
        # and not yet offered to the network, and the messages waiting for their packets
        self.ni = Interfaces(self.tiles)
        self._sized: dict[tuple[int, int], tuple[np.ndarray, int]] = {}  # (kind, data bytes) -> (flits a packet, flits)
        self._out_msgs: list[tuple] = []
        self._out_pkts: list[tuple[int, int, int]] = []
        self.egress = cfg.system.egress if cfg.system is not None else ()
        self.chip_id = cfg.system.chip if cfg.system is not None else 0
        self.left_chip: list[m.Message] = []  # messages IO units handed to the chip network (``now`` in ``sent``)
        # measurements: per message kind, messages, packets and flits sent (plain lists: send
        # adds to them once a message; ``sent_count`` and the others read them as arrays)
        self._sent = ([0] * len(m.KINDS), [0] * len(m.KINDS), [0] * len(m.KINDS))
        # what the results need, not every event (a run must not grow with its tokens): deliveries
        # and work records other than requests are folded into digests for the result hash (sim/chip/digest.py), the
        # MUs' bytes into their peaks, integrals and samples (sim/chip/occupancy.py); a run
        # writing a Chrome trace keeps the deliveries and the MUs' changes too
        self.deliveries = Digest(4)  # (message id, destination, cycle, kind)
        self.delivery_log: list[tuple[int, int, int, int]] | None = [] if cfg.trace else None
        self.oracle_log = Rows(len(oracle.COLUMNS))
        alone = len(self.my_tiles) == spec.tiles  # the whole chip: the MUs' totals fold as they go
        self.occupancy = Occupancy([uid for uid, u in self.units.items() if isinstance(u, MemoryUnit)],
                                   cfg.sample_cycles, alone, keep_log=cfg.trace)
        self.lives = Rows(len(BufferLife.__dataclass_fields__))  # buffers freed so far (BufferLife.coded rows)
        self.life_names: dict[int, str] = {}  # the codes of their ``freed_by``
        self.records: list[WorkRecord] = []  # requests (latency and throughput count them)
        self.work = Digest(6)  # every other work record (steps, trials): kind, ident, start, end, tokens, status
        self.work_log: list[WorkRecord] | None = [] if cfg.trace else None  # them all, in a traced run
        self.work_counts: dict[str, int] = {}
        self.logged: list = []  # workload-specific records (KernelRecord, PartitionRecord, ...)
        self.counts = {"admitted": 0, "finished": 0}
        self.trace_events: list[tuple] = []
        self.trace_dropped = 0
        self.memory_map: dict | None = None  # the MUs' contents at run.memory_map's cycle, once taken
        # start the workload's units
        for unit in self.units.values():
            if isinstance(unit, ComputeUnit):
                self.at(0, unit, self._start_unit, unit)

    def _start_unit(self, u) -> None:
        u.spawn(self.workload.start(u))

    # ------------------------------------------------------------------ services to units
    def at(self, cycle: int, unit, fn, arg) -> None:
        heapq.heappush(self.heap, (cycle, TIMER, unit.uid, unit.next_seq(), fn, arg))

    @property
    def sent_count(self) -> np.ndarray:
        return np.array(self._sent[0], dtype=np.int64)

    @property
    def sent_packets(self) -> np.ndarray:
        return np.array(self._sent[1], dtype=np.int64)

    @property
    def sent_flits(self) -> np.ndarray:
        return np.array(self._sent[2], dtype=np.int64)

    def send(self, unit, kind: int, dst: int, ready, **fields) -> m.Message:
        unit.sent += 1
        src = fields.pop("src", unit.uid)  # an IO unit passes on a remote sender's id
        now = self.now
        msg = m.Message((unit.uid << 32) | unit.sent, kind, src, dst, sent=now, **fields)
        if dst < 0:  # a unit of another chip (messages.remote_unit)
            msg.chip, msg.dst = m.split_remote(dst)
        elif dst in self.flow_ids and kind in _DATA_KINDS:
            msg.flags |= m.FLOW
        data = msg.nbytes if kind in _DATA_KINDS and not msg.flags & m.FLOW else 0
        sized = self._sized.get((kind, data))
        if sized is None:  # a run sends a few sizes of message, millions of times
            if len(self._sized) >= SIZES_KEPT:
                self._sized.clear()
            per_packet = self.cfg.sizing.packet_flits(kind, data)
            sized = self._sized[kind, data] = (np.array(per_packet, dtype=np.int64), sum(per_packet))
        flits, nflits = sized
        n = msg.packets = len(flits)
        if ready is None:
            ready = now
        jitter = self.cfg.jitter
        if jitter:
            j = int(rng.below(self.cfg.seed, STREAM_JITTER, unit.uid, unit.sent, jitter + 1))
            ready = [r + j for r in ready] if isinstance(ready, list) else ready + j
        # a message for another chip crosses this chip's NoC to the IO unit its route leaves by
        dst_tile = self._tile_of[dst if msg.chip < 0 else self.egress[msg.chip]]
        local = self._mine[dst_tile]
        first = now + NI_LATENCY
        if isinstance(ready, list) and len(ready) != n:
            raise ValueError(f"a message of {n} packets sent with {len(ready)} ready cycles")
        entry = self.ni.entry(msg, n) if local else -1
        if isinstance(ready, list):  # each packet ready at its own cycle
            cycles = self.ni.send(now, unit.tile, dst_tile, first, np.array(ready, dtype=np.int64), flits, entry)
        else:  # most messages: their packets ready at once
            cycles = self.ni.send(now, unit.tile, dst_tile, ready if ready > first else first, _E, flits, entry)
        if not local:
            tiles, src_tile, mid = self.tiles, unit.tile, msg.msg
            self._out_pkts.extend([(c * tiles + src_tile, mid, dst_tile) for c in cycles.tolist()])
            self._out_msgs.append(msg.row())
        count, packets, flits_sent = self._sent
        count[kind] += 1
        packets[kind] += n
        flits_sent[kind] += nflits
        return msg

    def leave_chip(self, msg: m.Message) -> None:
        """An IO unit hands ``msg`` to the chip network now."""
        msg.sent = self.now
        self.left_chip.append(msg)

    def enter_chip(self, cycle: int, io: int, msg: m.Message) -> None:
        """``msg`` from another chip reaches IO unit ``io`` at ``cycle`` (not before this epoch's end)."""
        io_unit = self.units[io]
        assert isinstance(io_unit, IoUnit)
        self.at(cycle, io_unit, io_unit.arrive, msg)

    def oracle(self, unit, event: int, alloc: int) -> None:
        self.oracle_log.append(oracle.entry(self.now, unit.uid, unit.next_seq(), event, alloc))

    def mem_delta(self, mu: int, used: int, reserved: int) -> None:
        self.occupancy.delta(self.now, mu, used, reserved)

    def buffer_life(self, life: BufferLife) -> None:
        self.lives.append(life.coded(self.life_names))

    def record(self, kind: str, ident: int, start: int, end: int, tokens: int, status: str) -> None:
        if kind == "request":
            self.records.append(WorkRecord(kind, ident, start, end, tokens, status))
        else:
            self.work_counts[kind] = self.work_counts.get(kind, 0) + 1
            self.work.add((code(kind), ident, start, end, tokens, code(status)))
            if self.work_log is not None:
                self.work_log.append(WorkRecord(kind, ident, start, end, tokens, status))

    def log(self, record) -> None:
        """Keep a workload's own typed record (its ``figures`` reads them after the run)."""
        self.logged.append(record)

    def trace_span(self, uid: int, name: str, start: int, dur: int, cat: str, args=None) -> None:
        if self.cfg.trace:
            self._trace(("X", uid, name, cat, start, dur, args))

    def trace_instant(self, uid: int, name: str, args=None) -> None:
        if self.cfg.trace:
            self._trace(("i", uid, name, "memory", self.now, 0, args))

    def _trace(self, ev) -> None:
        if len(self.trace_events) < self.cfg.trace_limit:
            self.trace_events.append(ev)
        else:
            self.trace_dropped += 1

    # ------------------------------------------------------------------ epoch API
    def advance(self, t0: int, t1: int, inbound: ChipBoundary | None = None) -> ChipBoundary:
        if t0 < self.t:
            raise ValueError(f"chip shard already at cycle {self.t}, cannot restart at {t0}")
        with _no_cycle_collection():
            return self._advance(t0, t1, inbound)

    def _advance(self, t0: int, t1: int, inbound: ChipBoundary | None) -> ChipBoundary:
        if inbound is not None and len(inbound):
            self._accept(inbound)
        net_out = []
        step = self.cfg.step
        snap = self.cfg.memory_map_cycle
        # the loop runs once per window of network work: keep its lookups local
        heap, delay, net, stopping = self.heap, self.net_delay, self.net, self._stopping
        net_next, run_units, collect = net.next_event, self._run_units, self._collect
        inf = float("inf")
        t = t0  # the network has served every event before t: every delivery before t + delay is known
        while True:
            h = heap[0][0] if heap else inf
            nxt = min(h, net_next())
            # every event before ``snap`` is done, and none can still arrive (inbound
            # traffic of later epochs is due at t1 or later)
            pending = snap >= 0 and self.memory_map is None and t1 >= snap
            if pending and nxt >= snap:
                self.memory_map = self._snapshot(snap)
                pending = False
            if nxt >= t1:
                break
            if nxt > t:
                t = int(nxt)
            bound = min(t + delay, t1, snap) if pending else min(t + delay, t1)
            if h < bound:  # the units first: their packets enter the network from h + NI_LATENCY on
                run_units(bound)
                if self.ni.offered:
                    self._flush_offers()
                continue
            # the network up to the first cycle a unit could offer a packet at
            u = int(min(t1, h + NI_LATENCY))
            if pending and t < snap < u:
                u = snap
            if stopping is not None:  # ... or a delivery it makes first could let a unit offer one
                out, t = stopping.advance_to_ejection(t, u, NI_LATENCY)
            else:
                start, t = t, min(u, t + step)
                out = net.advance(start, t)
            if len(out):
                net_out.append(out)
            collect()
        self.t = t1
        return self._outbound(net_out)

    def _run_units(self, u: int) -> None:
        heap, units = self.heap, self.units
        while heap and heap[0][0] < u:
            cycle, cls, uid, _, fn, arg = heapq.heappop(heap)
            self.now = cycle
            if cls == DELIVERY:
                row = (arg.msg, uid, cycle, arg.kind)
                self.deliveries.add(row)
                if self.delivery_log is not None:
                    self.delivery_log.append(row)
                units[uid].on_message(arg)
            else:
                fn(arg)

    def _flush_offers(self) -> None:
        self.net.offer(*self.ni.take_offers())

    def _collect(self) -> None:
        """Packets that reached their terminal: complete messages become deliveries."""
        pk, cyc = self.net.take_ejected()
        if not len(pk):
            return
        ni, heap = self.ni, self.heap
        inbox, last = ni.inbox, ni.last
        for e in ni.arrive(pk, cyc):
            msg = inbox[e]
            dst = msg.dst if msg.chip < 0 else self.egress[msg.chip]
            heapq.heappush(heap, (int(last[e]), DELIVERY, dst, msg.msg, None, msg))
            ni.done(e)

    def _accept(self, b: ChipBoundary) -> None:
        if len(b.net):
            self.net.deliver(b.net)
        # a message's record travels in the epoch it was sent in, with its packets' ids: before any of them
        entries = {}
        for row in b.msgs.tolist():
            msg = m.Message(*row)
            entries[msg.msg] = self.ni.entry(msg, msg.packets)
        if len(b.pkt):
            self.ni.expect(np.ascontiguousarray(b.pkt, dtype=np.int64),
                           np.array([entries[x] for x in b.pkt_msg.tolist()], dtype=np.int64))

    def _outbound(self, net_out: list) -> ChipBoundary:
        net = self._no_net.join(net_out)
        msgs = np.array(self._out_msgs, dtype=np.int64).reshape(-1, NF)
        if self._out_pkts:
            p = np.array(self._out_pkts, dtype=np.int64)
            pk, pm, pt = p[:, 0], p[:, 1], p[:, 2]
        else:
            pk = pm = pt = _E
        self._out_msgs, self._out_pkts = [], []
        return ChipBoundary(net, msgs, pk, pm, pt)

    def next_event(self) -> float:
        return min(self.heap[0][0] if self.heap else float("inf"), self.net.next_event())

    def watch_cut(self, owner: np.ndarray) -> None:
        """Get ready for ``earliest_output``: ``owner[tile]`` = shard. A unit that receives a
        message may send one NI_LATENCY cycles later, so deliveries relay (sim/noc/cut.py)."""
        self.net.watch_cut(owner, relay=NI_LATENCY)
        reach = self.net.offer_reach() + NI_LATENCY  # from a unit's event to its first packet's arrival
        self._adjacent = np.flatnonzero(np.isfinite(reach).any(axis=0)).tolist()
        local = {int(t): i for i, t in enumerate(self.my_tiles.tolist())}
        self._unit_reach = {uid: reach[local[u.tile]].tolist() for uid, u in self.units.items()}
        self._reach_floor = float(reach[:, self._adjacent].min()) if self._adjacent else float("inf")

    def earliest_output(self) -> np.ndarray:
        """Per shard, the earliest cycle anything of this shard could be due there: the
        network's traffic (its deliveries relaying), and every pending event of a unit (the
        unit may send at that cycle, from its tile, to any destination)."""
        out = self.net.earliest_output()
        heap, adj = self.heap, self._adjacent
        if not heap or not adj:
            return out
        reach, floor = self._unit_reach, self._reach_floor
        cap = max(out[j] for j in adj)
        n = len(heap)
        todo = [0]
        while todo:  # the heap is a tree whose children come no earlier: skip subtrees that cannot lower a bound
            i = todo.pop()
            c = heap[i][0]
            if c + floor >= cap:
                continue
            r = reach[heap[i][2]]
            for j in adj:
                if c + r[j] < out[j]:
                    out[j] = c + r[j]
            cap = max(out[j] for j in adj)
            i = 2 * i + 1
            if i < n:
                todo.append(i)
                if i + 1 < n:
                    todo.append(i + 1)
        return out

    def deliver(self, b: ChipBoundary) -> None:
        if len(b):
            self._accept(b)

    def counters(self) -> tuple[int, int]:
        return self.counts["admitted"], self.counts["finished"]

    def report(self) -> ShardResult:
        """What the finished shard hands back (sim/chip/report.py)."""
        return shard_result(self)

    # ------------------------------------------------------------------ inspection
    def _snapshot(self, cycle: int) -> dict:
        out = {}
        for uid, u in sorted(self.units.items()):
            if isinstance(u, MemoryUnit):
                out[uid] = {"policy": self.cfg.policy.name, "used": u.storage.used,
                            "reserved": u.storage.reserved, "buffers": len(u.table), "paged": u.storage.paged,
                            "extents": [[e.start, e.size, e.buffer, e.used, e.virtual] for e in u.storage.extents()],
                            "sizes": {b: r.size for b, r in u.table.items()},
                            "evicted": sorted(b for b, r in u.table.items() if r.evicted)}
        return {"cycle": cycle, "mus": out}

    def mus(self):
        return [u for _, u in sorted(self.units.items()) if isinstance(u, MemoryUnit)]

    def cus(self):
        return [u for _, u in sorted(self.units.items()) if isinstance(u, ComputeUnit)]

    def drams(self):
        """DRAM interfaces, moving data in packets or as flows (not memory tiers)."""
        return [u for _, u in sorted(self.units.items())
                if isinstance(u, DramUnit) or (isinstance(u, TierUnit) and u.tier is None)]

    def flow_units(self):
        """Memories whose transfers are flows: tier controllers, DRAM interfaces under noc.bulk = flows."""
        return [u for _, u in sorted(self.units.items()) if isinstance(u, TierUnit)]

