"""A memory tier's controller (HBM, DDR): capacity in pages, bandwidth shared by flows.

A chip with tiers (mapping/chips.py, ``TierSpec``) has one controller unit per tier, on its
edge; a chip without tiers has DRAM interfaces (sim/chip/dram.py), which are controllers of
this kind too when its bulk transfers are flows (``noc.bulk = "flows"``: one interface's
bandwidth and latency, its data leaving by its own tile's link, no pages). Every transfer
to or from such a unit is a flow (sim/flows), never data packets: the request
or the write's header crosses the NoC as a packet, the bytes move at the flow's rate, and the
reply (a read's response, a load's write into an MU, a write's acknowledgement) is a
header-only packet sent when the last byte is through, plus the tier's latency. The flows of
a tier share, max-min fairly and re-rated at each start and end:

- its channels: one bandwidth (the tier's; addresses interleave over every channel);
- the interface link of the edge tile in the row of the unit at the far end (the link's data
  rate in full packets, ``Sizing.link_data_rate``, or the tier's ``port_bandwidth``): data enters
  and leaves the grid there (a DRAM interface: its own tile's link, for every flow);
- that unit's network interface (the same rate): several flows to one unit share it;
- a copy to another tier (CTRL_COPY) crosses the channels only, never faster than the other
  tier's bandwidth.

Every resource belongs to this unit, so it rates its flows alone, in cycle order: the result
is the same for any shard count and backend (docs/design.md, "Flows"). A flow's bytes do not
occupy NoC links (they are counted as bytes x hops for the NoC's energy).

Regions (CTRL_TIER_ALLOC, _GROW, _FREE) take the tier's pages (sim/memory/page_pool.py); a write
naming an MU's buffer (an eviction) takes pages for it until that buffer is freed.
"""

from __future__ import annotations

import math

from sim.chip import messages as m
from sim.chip.units import Unit
from sim.flows import FlowSet
from sim.memory.page_pool import TierMemory

_READ, _LOAD, _WRITE, _COPY = range(4)


class TierUnit(Unit):
    def __init__(self, uid: int, tile: int, shard, cfg, index: int):
        super().__init__(uid, tile, shard)
        spec = cfg.spec
        self.cfg = cfg
        self.index = index
        self.tier = spec.tiers[index] if spec.tiers else None  # None: a DRAM interface
        self.flows = FlowSet(together=1.0)  # it acts on whole cycles: flows ending within one end together
        self.link = cfg.sizing.link_data_rate()
        self.ports: dict[int, int] = {}  # row -> resource of its edge tile's interface link
        self.ends: dict[int, int] = {}  # tile -> resource of its network interface
        if self.tier is not None:
            self.latency = self.tier.latency_cycles(spec.clock_hz)
            self.channels = self.flows.resource(self.tier.bytes_per_cycle(spec.clock_hz))
            self.edge_col = 0 if self.tier.edge == "left" else spec.cols - 1
        else:
            self.latency = spec.dram_latency
            self.channels = self.flows.resource(float(spec.dram_bytes_per_cycle))
            self.edge_col = tile % spec.cols
            self.own_port = self.flows.resource(self.link)  # every flow leaves by this tile's link
        self.memory = TierMemory(self.tier) if self.tier is not None else None
        self.jobs: dict[int, tuple] = {}  # flow id -> (what, message, destination)
        self.last: dict[tuple[int, int], int] = {}  # (direction, far unit) -> its last flow: the next waits for it
        self.flow_ids = 0
        self.wake = -1  # cycle of the pending wake-up (-1: none)
        self.bytes_read = 0
        self.bytes_written = 0
        self.copied_to: dict[int, int] = {}  # tier index -> bytes this tier copied there (written there)
        self.byte_hops = 0  # flow bytes x NoC hops between the edge and the far unit
        self.grid_bytes = 0  # bytes of flows to or from units of the grid (not copies between tiers)
        self.flow_count = 0
        self.full_events = 0  # writes or regions refused: the tier was full
        self.refused_bytes = 0  # evicted bytes the full tier had no pages for: the data has nowhere to live

    # ------------------------------------------------------------------ messages
    def on_message(self, msg: m.Message) -> None:
        self._sync()
        kind = msg.kind
        if kind == m.READ_REQ:  # to the unit named in arg (a CU, or the reader an MU forwards)
            self._start(_READ, msg, msg.arg)
            self.bytes_read += msg.nbytes
        elif kind in (m.WRITE, m.APPEND):
            self._start(_WRITE, msg, msg.src)
            self.bytes_written += msg.nbytes
            if self.memory is not None and msg.buf >= 0 and not self.memory.grow(("mu", msg.src, msg.buf),
                                                                                  msg.nbytes):
                self.full_events += 1
                self.refused_bytes += msg.nbytes
        elif kind == m.FREE:
            if self.memory is not None and msg.buf >= 0:
                self.memory.release(("mu", msg.src, msg.buf))
        elif kind == m.CONTROL:
            self._control(msg)
        else:
            raise RuntimeError(f"memory controller {self.uid} cannot handle a {m.KINDS[kind]} message")
        self._schedule()

    def _control(self, msg: m.Message) -> None:
        op = msg.arg
        if op == m.CTRL_LOAD:  # stream nbytes into an MU's buffer
            self._start(_LOAD, msg, msg.mu)
            self.bytes_read += msg.nbytes
        elif op == m.CTRL_COPY:
            self._start(_COPY, msg, msg.buf)
            self.bytes_read += msg.nbytes
        elif self.memory is None:
            raise RuntimeError(f"DRAM interface {self.uid} holds no regions (control opcode {op})")
        elif op == m.CTRL_TIER_ALLOC:
            self.flow_ids += 1  # region ids come from the same counter: unique at this tier
            region = self.flow_ids
            ok = self.memory.grow(("region", region), msg.nbytes)
            self._answer(msg, region if ok else -1, ok)
        elif op == m.CTRL_TIER_GROW:
            self._answer(msg, msg.buf, self.memory.grow(("region", msg.buf), msg.nbytes))
        elif op == m.CTRL_TIER_FREE:
            self.memory.release(("region", msg.buf))
            if msg.tag:
                self._answer(msg, msg.buf, True)
        else:
            raise RuntimeError(f"memory controller {self.uid} got control opcode {op}")

    def _answer(self, msg: m.Message, region: int, ok: bool) -> None:
        if not ok:
            self.full_events += 1
        self.send(m.ACK, msg.src, ready=self.shard.now + 1, tag=msg.tag, buf=region,
                  status=m.STATUS_OK if ok else m.STATUS_NO_ROOM)

    # ------------------------------------------------------------------ flows
    def _start(self, what: int, msg: m.Message, far: int) -> None:
        if msg.nbytes <= 0:
            self._finish(what, msg, far, self.shard.now)
            return
        if what == _COPY:
            other = self.cfg.spec.tiers[far - self.cfg.spec.tiles]
            route: tuple[int, ...] = (self.channels,)
            cap = other.bytes_per_cycle(self.cfg.spec.clock_hz)
        else:
            tile = int(self.shard.lay.tile[far]) if far >= 0 else self.tile
            route = (self.channels, self._port(tile), self._end(tile))
            cap = math.inf
            self.byte_hops += msg.nbytes * abs(tile % self.cfg.spec.cols - self.edge_col)
            self.grid_bytes += msg.nbytes
        self.flow_ids += 1
        self.flow_count += 1
        self.jobs[self.flow_ids] = (what, msg, far)
        # one stream per far unit and direction: its transfers are served in the order asked
        lane = (what == _WRITE, far)
        self.flows.start(self.flow_ids, msg.nbytes, route, float(self.shard.now), cap, after=self.last.get(lane))
        self.last[lane] = self.flow_ids

    def _port(self, tile: int) -> int:
        if self.tier is None:
            return self.own_port
        row = tile // self.cfg.spec.cols
        if row not in self.ports:
            wide = self.tier.port_bandwidth / self.cfg.spec.clock_hz  # 0: the edge link's rate
            self.ports[row] = self.flows.resource(wide or self.link)
        return self.ports[row]

    def _end(self, tile: int) -> int:
        if tile not in self.ends:
            self.ends[tile] = self.flows.resource(self.link)
        return self.ends[tile]

    def _sync(self) -> None:
        """Every flow done by now replies (in the order they finished)."""
        now = self.shard.now
        for f in self.flows.advance(float(now)):
            what, msg, far = self.jobs.pop(f.key)
            lane = (what == _WRITE, far)
            if self.last.get(lane) == f.key:
                del self.last[lane]
            self._finish(what, msg, far, max(now, _cycle(f.time)))

    def _finish(self, what: int, msg: m.Message, far: int, done: int) -> None:
        ready = done + self.latency
        if what == _READ:
            self.send(m.READ_RESP, far, ready=ready, nbytes=msg.nbytes, tag=msg.tag, mu=msg.mu, flags=m.FLOW)
        elif what == _LOAD:
            kind = m.WRITE if msg.flags & m.STREAM else m.APPEND
            self.send(kind, far, ready=ready, nbytes=msg.nbytes, mu=msg.mu, buf=msg.buf, alloc=msg.alloc,
                      flags=msg.flags | m.FLOW)
        elif what == _WRITE:
            if msg.tag:  # a swap-out its sender waits for
                self.send(m.ACK, msg.arg, ready=ready, tag=msg.tag, mu=msg.mu)
        else:
            k = far - self.cfg.spec.tiles
            self.copied_to[k] = self.copied_to.get(k, 0) + msg.nbytes
            self.send(m.ACK, msg.src, ready=ready, tag=msg.tag, buf=far)

    def _schedule(self) -> None:
        """Wake when the next flow finishes (a later call may move it: stale wake-ups do nothing)."""
        nxt = self.flows.next_finish()
        if math.isinf(nxt):
            return
        c = max(self.shard.now, _cycle(nxt))
        if c != self.wake:
            self.wake = c
            self.shard.at(c, self, self._woken, c)

    def _woken(self, cycle: int) -> None:
        if cycle != self.wake:
            return
        self.wake = -1
        self._sync()
        self._schedule()


def _cycle(t: float) -> int:
    """The cycle a flow finishing at instant ``t`` is done by (a float a hair above a whole cycle
    is that cycle)."""
    return int(math.ceil(t - 1e-9 * max(1.0, t)))
