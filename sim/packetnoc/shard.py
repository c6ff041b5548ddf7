"""One shard of the packet-level NoC: event-driven, a packet at a time per link.

A packet of ``F`` flits reserves each link of its XY route, one after the other, for
``F`` cycles (cut-through: the head moves on while the body still streams behind it).
A head that reaches a router's input at cycle ``a`` bids for its output at
``a + routing_delay + vc_alloc_delay``; the output link is granted first come first
served from ``s = max(bid, link free)`` to ``s + F``, and the head reaches the next
router at ``s + flit_delay`` (the switch pipeline plus the link). The source's
injection link and the destination's ejection port are reserved the same way, so the
zero-load latency equals the cycle-level router's closed form
``(routing + vc_alloc + flit_delay) (H + 1) + inject_delay + F - 1`` (NocParams).
What it leaves out: finite buffers, credits and virtual channels, hence head-of-line
blocking and back-pressure; below saturation those add little (tests/chip compare it
with the cycle-level network), beyond it this model's queues grow without bound.

Bids are served in (bid cycle, static input-port id) order, compiled (kernel.py): the
same packet order whatever the shard cut, so results are bit-identical for any shard
count. Packets come from the same TrafficSource and are measured by the same
Measurement as the cycle-level NocShard's, so the two fidelities are interchangeable
behind the NetworkShard interface.
"""

from __future__ import annotations

import numpy as np

from sim.cycles import NEVER
from sim.network import NETWORKS, LinkCounts
from sim.noc import ports
from sim.noc import topology as topo
from sim.noc.cut import CutTables, bounds_of
from sim.noc.measure import EJECTED_ROW, TOTAL_ROW, WINDOW_ROW, Measurement
from sim.noc.params import NocParams
from sim.noc.shard import NocReport
from sim.noc.sources import CHUNK, TrafficSource
from sim.packetnoc import kernel as k
from sim.packetnoc.boundary import PacketBoundary, split_packets

_DONE = k.DONE


@NETWORKS.register("packet")
class PacketShard:
    """Routers of one rectangular region under the packet-level (link reservation) model."""

    boundary = PacketBoundary
    route_entry_bytes = 12  # the routing table widened to 8 bytes an entry, 12 at its peak while built (tracemalloc)

    def __init__(self, params: NocParams, region: topo.Region, record_ejections: bool = False,
                 measure: bool = True):
        """``measure``: keep the measurement-window statistics (for ``report``); a caller
        that only offers and collects packets (the chip) turns them off."""
        p = self.p = params
        self.region = region
        grid = p.grid
        P = self.P = ports.PORTS
        N = grid.n
        self.routers = region.routers(p.cols)
        nl = len(self.routers)
        self.local_of = np.full(N, -1, dtype=np.int64)
        self.local_of[self.routers] = np.arange(nl)
        self.t = 0
        nbr = grid.neighbor(self.routers[:, None], np.arange(P)[None, :]).ravel()
        self.nbr = nbr  # global router across output port id (l * P + o), -1 at the terminal/edge
        self.port = np.zeros((nl * P, k.PORT_COLS), dtype=np.int64)
        self.port[:, k.NBR_LOCAL] = np.where(nbr >= 0, self.local_of[np.maximum(nbr, 0)], -1)
        self.port[:, k.NEXT_PORT] = nbr * P + np.tile(ports.OPPOSITE, nl)  # the input port downstream
        self.node = np.zeros((nl, k.NODE_COLS), dtype=np.int64)
        self.node[:, k.ROUTER] = self.routers
        self.route = grid.route_table(self.routers).ravel()  # output port number, l * N + dst
        self.hkey = np.zeros(256, dtype=np.int64)
        self.hval = np.zeros((256, 4), dtype=np.int64)
        self.out = np.zeros((64, 5), dtype=np.int64)
        self.sc = np.zeros(k.SC_SIZE, dtype=np.int64)

        horizon = p.warmup_cycles + p.measure_cycles + p.drain_cycles
        self.measure = m = Measurement(p, nl * P, horizon + 4 * CHUNK if measure else 0)
        self.source = TrafficSource(p, self.routers, self.local_of, m.horizon)
        bid_delay = p.routing_delay + p.vc_alloc_delay
        prm = np.zeros(k.PRM_SIZE, dtype=np.int64)
        prm[[k.N, k.NL, k.P, k.HOP, k.FIRST_BID, k.FLIT_DELAY, k.PORT_BITS]] = (
            N, nl, P, p.flit_delay + bid_delay, p.inject_delay + bid_delay, p.flit_delay, int(N * P).bit_length())
        prm[[k.PACKET_FLITS, k.SYNTHETIC, k.RECORD, k.MEASURE]] = (
            p.packet_flits, self.source.synthetic, record_ejections, measure)
        prm[[k.W0, k.W1, k.HORIZON, k.PKT_LO, k.PKT_HI]] = m.w0, m.w1, m.horizon, m.pkt_lo, m.pkt_hi
        self.prm = prm
        self._port_bits = int(prm[k.PORT_BITS])
        self._synthetic = self.source.synthetic
        self._horizon = m.horizon
        self._nothing = PacketBoundary()  # returned whenever nothing leaves (never modified)
        self._next: float | None = None  # next_event() as the last advance found it
        self._cut: tuple | None = None  # watch_cut's tables, as earliest_output's kernel takes them
        self.kernel_tables: tuple = ()  # Tables as a plain tuple, kept as the arrays change
        self._replaced()

    def _replaced(self) -> None:
        """After an array of the state is replaced by a larger one: the kernels' record anew."""
        self.kernel_tables = tuple(k.Tables(
            prm=self.prm, sc=self.sc, port=self.port, node=self.node, route=self.route, hkey=self.hkey,
            hval=self.hval, local_of=self.local_of, out=self.out))

    # ------------------------------------------------------------------ epoch API
    def advance(self, t0: int, t1: int, inbound: PacketBoundary | None = None) -> PacketBoundary:
        """Simulate cycles [t0, t1); return the heads that bid in other shards."""
        self._check_start(t0)
        if inbound is not None and len(inbound):
            self._accept(inbound, t0)
        return self._run(t0, t1, -1)[0]

    def advance_to_ejection(self, t0: int, t1: int, relay: int) -> tuple[PacketBoundary, int]:
        """Simulate from ``t0`` up to ``t1`` or to ``relay`` cycles past the first tail ejected
        meanwhile, whichever comes first (a terminal may answer a packet ``relay`` cycles
        after it arrived: nothing before that cycle can depend on it); returns the heads that
        bid in other shards and the cycle reached (StopsAtEjection)."""
        return self._run(t0, t1, relay)

    def _check_start(self, t0: int) -> None:
        if t0 < self.t:
            raise ValueError(f"shard already at cycle {self.t}, cannot restart at {t0}")

    def _run(self, t0: int, t1: int, relay: int) -> tuple[PacketBoundary, int]:
        self._check_start(t0)
        sc, src, m = self.sc, self.source, self.measure
        sc[k.OUT_N] = 0
        sc[k.TAIL_MIN] = NEVER
        while True:
            more = self._synthetic and src.chunk_end <= self._horizon
            why, nxt, n_out = k.run(t0, t1, more, self.kernel_tables, src.kernel_tables, m.kernel_tables, relay)
            if why == _DONE:
                break
            self._provide(why)
        if relay >= 0:
            t1 = min(t1, sc.item(k.TAIL_MIN) + relay)
        self.t = t1
        self._next = float(nxt) if nxt < NEVER else float("inf")
        if not n_out:
            return self._nothing, t1
        o = self.out[:n_out].T.copy()
        res = PacketBoundary(o[0], o[1], o[2], o[3], o[4])
        if res.earliest() < t1:
            raise RuntimeError(f"boundary head due at cycle {res.earliest():.0f} inside the epoch ending at {t1}")
        return res, t1

    def _provide(self, why: int) -> None:
        """Give the kernel what it returned for, before it resumes."""
        if why == k.NEED_CHUNK:
            self.source.new_chunk()
        elif why == k.NEED_CYCLES:
            self.measure.grow_cycles(int(self.sc[k.NEED]))
        elif why == k.NEED_ROOM:
            self.measure.make_room(1)
            self._heap_room(int(self.sc[k.HEAP_N]) + 1)
            if int(self.sc[k.OUT_N]) == len(self.out):
                self.out = np.concatenate((self.out, np.zeros_like(self.out)))
                self._replaced()
        elif why == k.SKIPPED:
            raise RuntimeError("packets created before the epoch start were skipped")

    def next_event(self) -> float:
        if self._next is not None:  # as advance left it, nothing offered or delivered since
            return self._next
        nxt = float(self.hkey.item(0) >> self._port_bits) if self.sc.item(k.HEAP_N) else float("inf")
        scr = self.source.next_scripted()
        if scr < nxt:
            nxt = scr
        if self._synthetic:
            nxt = min(nxt, self.source.next_creation())
        return nxt

    def deliver(self, b: PacketBoundary) -> None:
        if len(b):
            self._accept(b, self.t)

    def _accept(self, b: PacketBoundary, t0: int) -> None:
        self._next = None
        if b.cycle.min() < t0:
            raise RuntimeError("inbound head due before the epoch start")
        rows = np.stack((b.cycle, b.port, b.pkt, b.dst, b.flits)).astype(np.int64)
        self._heap_room(int(self.sc[k.HEAP_N]) + rows.shape[1])
        k.accept(self.kernel_tables, rows)

    def _heap_room(self, need: int) -> None:
        """The bid heap doubled until it holds ``need`` entries. (An inbound boundary may need
        more than one entry's room: grown only when full, a heap with some room but less than
        the boundary's heads never grew, and ``deliver`` looped for ever.)"""
        size = len(self.hkey)
        if need <= size:
            return
        while size < need:
            size *= 2
        self.hkey = np.concatenate((self.hkey, np.zeros(size - len(self.hkey), dtype=self.hkey.dtype)))
        self.hval = np.concatenate((self.hval, np.zeros((size - len(self.hval), *self.hval.shape[1:]),
                                                        dtype=self.hval.dtype)))
        self._replaced()

    def watch_cut(self, owner: np.ndarray, relay: int = -1) -> None:
        """Get ready for ``earliest_output`` (NetworkShard): ``owner[router]`` = shard."""
        t = CutTables.build(topo.Grid(self.p.rows, self.p.cols, self.p.torus), self.routers, owner, relay)
        self._reach = t.reach(int(self.prm[k.FIRST_BID]), int(self.prm[k.HOP]))
        self._cut = t.kernel_args(self.route, self._reach)
        self._eo = np.zeros(t.shards, dtype=np.int64)

    def earliest_output(self) -> np.ndarray:
        """Per shard, the earliest cycle a head now pending or offered here could bid there."""
        if self._cut is None:
            raise RuntimeError("earliest_output needs watch_cut first")
        src = self.source
        k.earliest_output(self.kernel_tables, src.kernel_tables, src.chunk_end,
                          self._synthetic and src.chunk_end <= self._horizon, self._cut, self._eo)
        return bounds_of(self._eo)

    def offer_reach(self) -> np.ndarray:
        """[local routers, shards] least cycles from an offer at a router to a bid in each shard."""
        return bounds_of(self._reach)

    def offer(self, cycles, src, dst, flits=None) -> None:
        """Script packets (NocShard.offer)."""
        self.source.offer(self.t, cycles, src, dst, flits)
        self._next = None

    def take_ejected(self) -> tuple[np.ndarray, np.ndarray]:
        """(packet ids, cycles their tails reached the terminal) since the last call."""
        return self.measure.take_ejected()

    def counters(self) -> tuple[int, int]:
        return self.measure.counters()

    def link_totals(self) -> LinkCounts:
        """Flits over every router-to-router link of the shard, over the whole run."""
        used = np.flatnonzero((self.nbr >= 0) & (np.arange(len(self.nbr)) % self.P != ports.LOCAL))
        return LinkCounts(self.routers[used // self.P], used % self.P, self.measure.links[TOTAL_ROW, used])

    @classmethod
    def split(cls, out: PacketBoundary, owner: np.ndarray, params: NocParams, shards: int) -> list[PacketBoundary]:
        return split_packets(out, owner, shards)

    # ------------------------------------------------------------------ results
    def report(self) -> NocReport:
        lc = self.link_totals()
        used = self.local_of[lc.router] * self.P + lc.port
        m = self.measure
        return NocReport(
            **m.fields(),
            ejected_flits=np.cumsum(m.cycles[EJECTED_ROW]),
            link_router=lc.router,
            link_port=lc.port,
            link_flits=m.links[WINDOW_ROW, used],
            flits_buffered=0,
            flits_queued=0,  # an injected packet holds its link reservations at once
            flits_in_flight=int(self.sc[k.PENDING_FLITS]),
        )
