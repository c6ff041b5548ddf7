"""One shard of the NoC: the routers (and their terminals) of a rectangle of the grid.

``NocShard.advance(t0, t1, inbound)`` simulates cycles [t0, t1) given the flits and
credits that arrive on its boundary links and returns those that leave it. It does
not know whether it runs in-process or in a Ray actor.

Each router is input-queued with virtual channels (VCs), credit-based flow control,
wormhole switching, and separable input-first VC and switch allocators built from
round-robin arbiters, one iteration each (BookSim2's IQRouter). Every cycle of every
router runs in one compiled kernel (sim/noc/kernel.py); this class builds the shard's
wiring and state tables, feeds the kernel its packets (sim/noc/sources.py) and keeps
the measurements (sim/noc/measure.py).

Index conventions (local to the shard): router ``l``; port ``p`` (sim/noc/ports.py);
input VC ``i = (l * PORTS + p) * vcs + v``; output VC ``(l * PORTS + o) * vcs + w`` is
the buffer-state of VC ``w`` of the input port that output ``o`` feeds. Global ids
use the global router id in place of ``l``; only boundary traffic carries them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cycles import NEVER
from sim.network import NETWORKS, LinkCounts
from sim.noc import kernel as k
from sim.noc import ports
from sim.noc import topology as topo
from sim.noc.boundary import FlitBoundary, split_flits
from sim.noc.cut import HALF, CutTables, bounds_of
from sim.noc.measure import EJECTED_ROW, TOTAL_ROW, WINDOW_ROW, Measurement
from sim.noc.params import NocParams
from sim.noc.sources import CHUNK, TrafficSource

# Above this many bytes of router state a shard asks for its random lines ahead (kernel.ahead):
# measured on a 2-core EPYC, cycles per CPU-second with and without: 16x16
# (1.5 MB) -10%, 24x24 (3.6 MB) -7%, 28x28 (5.0 MB) -7%, 32x32 (6.8 MB) +22%, 36x36 +24%, 64x64 +50%
CACHE_BYTES = 6 << 20
LOOK_AHEAD = 2  # routers (1 to 3 measured alike at 32x32; 8: 12% slower)


@dataclass
class NocReport:
    """What a shard measured (merged across shards by the coordinator)."""

    created_flits: np.ndarray  # per cycle
    ejected_flits: np.ndarray  # per cycle (by arrival at the terminal)
    inject_pkt: np.ndarray  # measured packets: id, destination, cycle the head left the source
    inject_dst: np.ndarray
    inject_cycle: np.ndarray
    eject_pkt: np.ndarray  # measured packets: id and cycle the tail reached the terminal
    eject_cycle: np.ndarray
    flit_latency_sum: int  # over measured flits: sum of (eject - creation)
    flit_latency_count: int
    measured_hops: int  # router-to-router link traversals by measured head flits
    window_created_by_src: np.ndarray  # [nodes] flits created by each source in the window
    window_ejected_by_src: np.ndarray  # [nodes] flits of each source ejected in the window
    link_router: np.ndarray  # global router id, port, flits in the measurement window
    link_port: np.ndarray
    link_flits: np.ndarray
    flits_buffered: int
    flits_queued: int  # flits still in source queues
    flits_in_flight: int  # on links (local calendar)


def first_free_table(vcs: int) -> np.ndarray:
    """``table[mask * vcs + start]``: the first VC whose bit is set in ``mask``, searching
    cyclically from ``start`` (-1 when none is)."""
    if vcs > 16:
        raise ValueError("at most 16 virtual channels per port are supported")
    masks = np.arange(1 << vcs)[:, None, None]
    order = (np.arange(vcs)[None, :, None] + np.arange(vcs)[None, None, :]) % vcs  # [start, k]
    free = (masks >> order) & 1  # [mask, start, k]
    first = free.argmax(axis=2)
    return np.where(free.any(axis=2), order[0][np.arange(vcs)[None, :], first], -1).ravel().astype(np.int64)


@NETWORKS.register("cycle")
class NocShard:
    """Routers of one rectangular region, advanced cycle by cycle."""

    boundary = FlitBoundary
    route_entry_bytes = 4  # its routing table's bytes per (router, destination) at their peak (tracemalloc)

    def __init__(self, params: NocParams, region: topo.Region, record_ejections: bool = False,
                 measure: bool = True):
        """``record_ejections``: keep (packet id, cycle) of every packet delivered, for a
        caller that offers its own packets (``offer``) and collects them (``take_ejected``).
        ``measure`` is accepted for the NetworkShard interface; the window statistics of
        this model cost little and are always kept."""
        p = self.p = params
        self.region = region
        self.P = ports.PORTS
        self.routers = region.routers(p.cols)
        self.local_of = np.full(p.grid.n, -1, dtype=np.int64)
        self.local_of[self.routers] = np.arange(len(self.routers))
        self.t = 0
        self._wire()
        self._buffers()
        horizon = p.warmup_cycles + p.measure_cycles + p.drain_cycles
        self.measure = Measurement(p, len(self.routers) * self.P,
                                   horizon + 4 * (p.flit_delay + p.credit_return) + 4 * CHUNK)
        self.source = TrafficSource(p, self.routers, self.local_of, self.measure.horizon)
        self.prm = self._parameters(record_ejections)
        self._synthetic = self.source.synthetic
        self._nothing = FlitBoundary()  # returned whenever nothing leaves (never modified)
        self._cut: tuple | None = None  # watch_cut's tables, as earliest_output's kernel takes them
        self.kernel_tables: tuple = ()  # Tables as a plain tuple, kept as the arrays change
        self._replaced()

    def _wire(self) -> None:
        """The static wiring: what each output port feeds, where each input port's credits go,
        the VCs' and ports' starting state and the routing table."""
        p, grid = self.p, self.p.grid
        P, V, B = ports.PORTS, p.vcs, p.vc_buffers
        nl = len(self.routers)
        NI = nl * P * V
        port_ids = np.arange(P)
        nbr = grid.neighbor(self.routers[:, None], port_ids[None, :])  # [nl, P] global id or -1
        nbr_local = np.where(nbr >= 0, self.local_of[np.maximum(nbr, 0)], -1)
        kind = np.full((nl, P), k.NO_LINK, dtype=np.int64)
        kind[:, ports.LOCAL] = k.EJECT
        kind[(nbr >= 0) & (nbr_local >= 0)] = k.LOCAL_LINK
        kind[(nbr >= 0) & (nbr_local < 0)] = k.REMOTE_LINK
        self.out_kind = kind.ravel()
        opp = ports.OPPOSITE[port_ids][None, :]
        # links come in twins, so output port o's downstream input port and input port
        # o's upstream output port are both "port OPPOSITE[o] of the neighbour across o"
        twin = np.where(kind == k.REMOTE_LINK, (np.maximum(nbr, 0) * P + opp) * V,
                        (np.maximum(nbr_local, 0) * P + opp) * V)

        self.vc = np.zeros((NI, k.VC_COLS), dtype=np.int32)  # every column fits: half the bytes
        self.vc[:, k.VA_IN_NPTR] = P * V  # round-robin pointers are stored negated (size - ptr)
        self.vc[:, k.VA_OUT_NPTR] = P * V
        self.ready = np.zeros(NI, dtype=np.int64)  # from which cycle on an input VC may bid
        j = np.arange(nl * P)
        self.port = np.zeros((nl * P, k.PORT_COLS), dtype=np.int32)  # every column fits: half the bytes
        self.port[:, k.FREE_VCS] = np.where(self.out_kind == k.NO_LINK, 0, (1 << V) - 1)
        self.port[:, k.SA_IN_NPTR] = P
        self.port[:, k.SA_VC_NOFF] = V
        self.port[:, k.SA_OUT_NPTR] = P
        self.port[:, k.KIND] = self.out_kind
        self.port[:, k.NBR] = nbr.ravel()
        self.port[:, k.PNUM] = j % P
        self.port[:, k.PV_OFF] = (j % P) * V
        twin = twin.ravel()
        self.port[:, k.DOWN_BASE] = twin  # the input VC 0 output port j feeds (global id if remote)
        self.port[:, k.DOWN_PORT] = twin // V
        self.port[:, k.DOWN_ROUTER] = twin // (P * V)
        # the credit counter of VC 0 of the output port upstream (the source's for port 0)
        self.port[:, k.UP_BASE] = np.where(j % P == ports.LOCAL, NI + (j // P) * V, twin)
        self.credit = np.full(NI + nl * V, B, dtype=np.int64)  # output VCs, then the sources'
        self.credit[:NI][np.repeat(self.out_kind == k.NO_LINK, V)] = 0
        # route[l * N + dst]: the output port a head at router l takes towards dst
        self.route = grid.route_table(self.routers).ravel()
        self.first_free = first_free_table(V)

    def _buffers(self) -> None:
        """The flit buffers, source queues, the event wheel and the kernels' scratch rows."""
        p, P = self.p, ports.PORTS
        nl = len(self.routers)
        V, B = p.vcs, p.vc_buffers
        NI = nl * P * V
        self.buf = np.zeros((NI * B, 3), dtype=np.int64)
        self.node = np.zeros((nl, k.NODE_COLS), dtype=np.int64)
        self.node[:, k.SRC_VC] = -1
        self.node[:, k.ROUTER] = self.routers
        self.sq = np.zeros((nl, 16, 3), dtype=np.int64)  # source queues: packet, destination, flits
        self.work = np.zeros((k.WORK_ROWS, max(nl * P, P * V)), dtype=np.int64)
        self.work[[k.KEY_A, k.KEY_B]] = NEVER
        # the event wheel: every delay is shorter than its length
        delays = (p.flit_delay, p.credit_return, p.inject_delay, p.inject_credit_return,
                  p.eject_credit_return, p.routing_delay)
        self.wheel = wheel = 1 << int(max(delays) + 1).bit_length()
        # inbound (flits, credits) due beyond the wheel, as k.accept takes them
        self._later: tuple[np.ndarray, np.ndarray] | None = None
        self.wheel_f = np.zeros((wheel, nl * P, 4), dtype=np.int64)  # an input port takes a flit a cycle
        self.wheel_c = np.zeros((wheel, len(self.credit)), dtype=np.int64)  # a counter, a credit a cycle
        self.wheel_n = np.zeros((2, wheel), dtype=np.int64)  # flits, credits due in each slot
        self.wheel_r = np.zeros((wheel, nl), dtype=np.int64)  # flits due at each router
        self.room = nl * P  # most rows any output or record buffer takes in one cycle
        self.out_f = np.zeros((max(64, self.room), 5), dtype=np.int64)
        self.out_c = np.zeros((max(64, self.room), 2), dtype=np.int64)
        self.sc = np.zeros(k.SC_SIZE, dtype=np.int64)
        self.sc[k.WHEEL_NEXT] = NEVER

    def _parameters(self, record_ejections: bool) -> np.ndarray:
        """The kernels' scalar parameters (``k.PRM_SIZE`` of them, by the kernel module's indices)."""
        p, m = self.p, self.measure
        P, V, B = ports.PORTS, p.vcs, p.vc_buffers
        nl = len(self.routers)
        half = V // 2
        prm = np.zeros(k.PRM_SIZE, dtype=np.int64)
        prm[[k.N, k.NL, k.P, k.V, k.B, k.PV, k.NI, k.COLS, k.TORUS]] = (p.grid.n, nl, P, V, B, P * V, nl * P * V,
                                                                         p.cols, p.torus)
        prm[[k.ROUTING_DELAY, k.VC_ALLOC_DELAY, k.FLIT_DELAY, k.CREDIT_RETURN, k.INJECT_DELAY,
             k.INJECT_CREDIT_RETURN, k.EJECT_CREDIT_RETURN]] = (
            p.routing_delay, p.vc_alloc_delay, p.flit_delay, p.credit_return, p.inject_delay,
            p.inject_credit_return, p.eject_credit_return)
        prm[[k.PACKET_FLITS, k.SYNTHETIC, k.RECORD]] = p.packet_flits, self.source.synthetic, record_ejections
        prm[[k.W0, k.W1, k.HORIZON, k.PKT_LO, k.PKT_HI]] = m.w0, m.w1, m.horizon, m.pkt_lo, m.pkt_hi
        # a torus' dateline classes use the lower or the upper half of the VCs
        prm[[k.CLASS0_BITS, k.CLASS1_BITS]] = (1 << half) - 1, ((1 << V) - 1) ^ ((1 << half) - 1)
        # a shard whose tables outgrow the caches asks for the lines a router will touch at
        # random a few routers before its turn (kernel.ahead); a smaller one finds them in
        # cache, where asking costs more than it saves
        state = (self.vc, self.ready, self.credit, self.port, self.buf, self.route, self.node, self.wheel_f,
                 self.wheel_c)
        prm[k.AHEAD] = LOOK_AHEAD if sum(a.nbytes for a in state) > CACHE_BYTES else 0
        return prm

    def _replaced(self) -> None:
        """After an array of the state is replaced by a larger one: the kernels' record anew."""
        self.kernel_tables = tuple(k.Tables(
            prm=self.prm, sc=self.sc, vc=self.vc, ready=self.ready, credit=self.credit,
            port=self.port, buf=self.buf, route=self.route, first_free=self.first_free, node=self.node,
            sq=self.sq, work=self.work, wheel_f=self.wheel_f, wheel_c=self.wheel_c, wheel_n=self.wheel_n,
            wheel_r=self.wheel_r, local_of=self.local_of, out_f=self.out_f, out_c=self.out_c))

    # ------------------------------------------------------------------ epoch API
    def advance(self, t0: int, t1: int, inbound: FlitBoundary | None = None) -> FlitBoundary:
        """Simulate cycles [t0, t1); return the flits and credits that leave the shard."""
        if t0 < self.t:
            raise ValueError(f"shard already at cycle {self.t}, cannot restart at {t0}")
        if inbound is not None and len(inbound):
            self._accept(inbound, t0)
        sc, src, m = self.sc, self.source, self.measure
        sc[k.OUT_F] = sc[k.OUT_C] = 0
        t = t0
        while True:
            more = self._synthetic and src.chunk_end <= m.horizon
            stop = t1
            if self._later is not None:  # stop where what is kept aside comes within reach
                rest = self._admit(t)
                if rest < float("inf"):
                    stop = min(t1, int(rest) - self.wheel + 1)
            t, why = k.run(t, stop, src.chunk_end, more, self.room, self.kernel_tables, src.kernel_tables,
                           m.kernel_tables)
            if why != k.DONE:
                self._provide(t, why)
            elif stop < t1:
                t = stop
            else:
                break
        self.t = t1
        if not (sc[k.OUT_F] or sc[k.OUT_C]):
            return self._nothing
        f, c = self.out_f[: sc[k.OUT_F]].T.copy(), self.out_c[: sc[k.OUT_C]].T.copy()
        out = FlitBoundary(f[0], f[1], f[2], f[3], f[4], c[0], c[1])
        if out.earliest() < t1:
            raise RuntimeError(
                f"boundary traffic due at cycle {out.earliest():.0f} inside the epoch ending at {t1}: "
                "the epoch is longer than the lookahead"
            )
        return out

    def _provide(self, t: int, why: int) -> None:
        """Give the kernel what it returned for, before it resumes at cycle ``t``."""
        src, m = self.source, self.measure
        if why == k.NEED_CHUNK:
            src.new_chunk()  # chunks tile time with no gaps
            while t >= src.chunk_end:
                src.new_chunk()
        elif why == k.NEED_CYCLES:
            while t + self.p.flit_delay >= m.cycles.shape[1]:  # a skip-ahead may jump far
                m.grow_cycles(2 * m.cycles.shape[1] - 1)
        elif why == k.NEED_ROOM:
            m.make_room(self.room)
            for name in ("out_f", "out_c"):
                a = getattr(self, name)
                if len(a) - int(self.sc[k.OUT_F if name == "out_f" else k.OUT_C]) < self.room:
                    setattr(self, name, np.concatenate((a, np.zeros_like(a))))
                    self._replaced()
        elif why == k.NEED_QUEUE:
            self._grow_queues()
        elif why == k.SKIPPED:
            raise RuntimeError(f"packets created at cycle {src.cre[0, src.cursor[0]]} were skipped")

    def _grow_queues(self) -> None:
        nl, Q = self.sq.shape[:2]
        idx = (self.node[:, k.SQ_HEAD][:, None] + np.arange(Q)[None, :]) % Q
        grown = np.zeros((nl, 2 * Q, 3), dtype=np.int64)
        grown[:, :Q] = np.take_along_axis(self.sq, idx[:, :, None], axis=1)
        self.sq = grown
        self.node[:, k.SQ_HEAD] = 0
        self._replaced()

    def next_event(self) -> float:
        """Earliest cycle >= self.t at which this shard has something to do."""
        sc = self.sc
        if sc.item(k.BUFFERED) or sc.item(k.QUEUED):
            return float(self.t)
        wheel = sc.item(k.WHEEL_NEXT)
        nxt = float(wheel) if wheel < NEVER else float("inf")
        if self._later is not None:
            nxt = min(nxt, float(self._later[0][0].min(initial=NEVER)), float(self._later[1][0].min(initial=NEVER)))
        nxt = min(nxt, self.source.next_scripted())
        return min(nxt, self.source.next_creation()) if self._synthetic else nxt

    def watch_cut(self, owner: np.ndarray, relay: int = -1) -> None:
        """Get ready for ``earliest_output`` (NetworkShard): ``owner[router]`` = shard."""
        p = self.p
        t = CutTables.build(topo.Grid(p.rows, p.cols, p.torus), self.routers, owner, relay)
        self._reach = t.reach(p.inject_delay, p.flit_delay)
        self._cut = t.kernel_args(self.route, self._reach)
        # the least delay from anything at a router to another shard: its flits' hops, or a
        # credit back across a cut link that feeds it
        fed = (t.in_from.reshape(-1, self.P) >= 0).any(axis=1)
        hops = t.hops[:, t.adjacent].min(axis=1) if len(t.adjacent) else np.full(len(self.routers), HALF)
        self._floor = np.minimum(np.minimum(hops, HALF // 16) * p.flit_delay,
                                 np.where(fed, p.credit_return, HALF)).astype(np.int64)
        self._order = np.argsort(self._floor, kind="stable").astype(np.int64)
        self._eo = np.zeros(t.shards, dtype=np.int64)
        self._no_later = np.zeros((5, 0), dtype=np.int64)

    def earliest_output(self) -> np.ndarray:
        """Per shard, the earliest cycle a flit or credit now held here could be due there."""
        if self._cut is None:
            raise RuntimeError("earliest_output needs watch_cut first")
        src = self.source
        later = self._no_later if self._later is None else self._later[0]
        k.earliest_output(self.kernel_tables, src.kernel_tables, later, src.chunk_end,
                          self._synthetic and src.chunk_end <= self.measure.horizon, self.t, self._cut,
                          self._order, self._floor, self._eo)
        return bounds_of(self._eo)

    def offer_reach(self) -> np.ndarray:
        """[local routers, shards] least cycles from an offer at a router to arriving in each shard."""
        return bounds_of(self._reach)

    def deliver(self, b: FlitBoundary) -> None:
        """Take boundary traffic into the event wheel without advancing (e.g. when stopping)."""
        if len(b):
            self._accept(b, self.t)

    def _accept(self, b: FlitBoundary, t0: int) -> None:
        """Inbound traffic due from ``t0`` (where the shard will resume) on: into the wheel,
        or kept aside while it is due beyond the wheel's reach."""
        if len(b.flit_cycle) and b.flit_cycle.min() < t0:
            raise RuntimeError("inbound flit due before the epoch start")
        flits = np.stack((b.flit_cycle, b.flit_ivc, b.flit_pkt, b.flit_dst, b.flit_flag)).astype(np.int64)
        credits = np.stack((b.credit_cycle, b.credit_ovc)).astype(np.int64)
        if self._later is not None:
            flits = np.concatenate((self._later[0], flits), axis=1)
            credits = np.concatenate((self._later[1], credits), axis=1)
            self._later = None
        self._later = (flits, credits)
        self._admit(t0)

    def _admit(self, t: int) -> float:
        """Move the traffic kept aside that is due before ``t + wheel`` into the wheel;
        return when the rest is due (inf: nothing is left)."""
        assert self._later is not None
        flits, credits = self._later
        fn, cn = flits[0] < t + self.wheel, credits[0] < t + self.wheel
        k.accept(self.kernel_tables, t, np.ascontiguousarray(flits[:, fn]), np.ascontiguousarray(credits[:, cn]))
        flits, credits = flits[:, ~fn], credits[:, ~cn]
        if not (flits.shape[1] or credits.shape[1]):
            self._later = None
            return float("inf")
        self._later = (flits, credits)
        return float(min(flits[0].min(initial=NEVER), credits[0].min(initial=NEVER)))

    # ------------------------------------------------------------------ results
    def _links_used(self) -> np.ndarray:
        return np.flatnonzero(np.isin(self.out_kind, (k.LOCAL_LINK, k.REMOTE_LINK)))

    def report(self) -> NocReport:
        used = self._links_used()
        m = self.measure
        return NocReport(
            **m.fields(),
            ejected_flits=m.cycles[EJECTED_ROW].copy(),
            link_router=self.routers[used // self.P],
            link_port=used % self.P,
            link_flits=m.links[WINDOW_ROW, used],
            flits_buffered=int(self.sc[k.BUFFERED]),
            flits_queued=int(self.sc[k.QUEUED_FLITS]),
            flits_in_flight=int(self.sc[k.IN_FLIGHT]) + (0 if self._later is None else self._later[0].shape[1]),
        )

    def offer(self, cycles, src, dst, flits=None) -> None:
        """Script packets: ``src`` (global router ids in this shard) creates a packet to
        ``dst`` of ``flits`` flits at each cycle. At most one packet per node per cycle,
        counting the synthetic ones; cycles must not lie in the past."""
        self.source.offer(self.t, cycles, src, dst, flits)

    def take_ejected(self) -> tuple[np.ndarray, np.ndarray]:
        """(packet ids, cycles their tails reached the destination terminal) since the last
        call; a packet id is ``creation cycle * nodes + source``. Needs record_ejections."""
        return self.measure.take_ejected()

    def counters(self) -> tuple[int, int]:
        """(measured packets created, measured packets whose tail has been ejected)."""
        return self.measure.counters()

    def link_totals(self) -> LinkCounts:
        """Flits over every router-to-router link of the shard, over the whole run."""
        used = self._links_used()
        return LinkCounts(self.routers[used // self.P], used % self.P, self.measure.links[TOTAL_ROW, used])

    @classmethod
    def split(cls, out: FlitBoundary, owner: np.ndarray, params: NocParams, shards: int) -> list[FlitBoundary]:
        return split_flits(out, owner, params.vcs, shards)
