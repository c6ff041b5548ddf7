"""One shard of the NoC: the routers (and their terminals) of a rectangle of the grid.

``NocShard.advance(t0, t1, inbound)`` simulates cycles [t0, t1) given the flits and
credits that arrive on its boundary links and returns those that leave it. It does
not know whether it runs in-process or in a Ray actor.

Each router is input-queued with virtual channels (VCs), credit-based flow control,
wormhole switching, and separable input-first VC and switch allocators built from
round-robin arbiters, one iteration each (BookSim2's IQRouter). All routers of the
shard are advanced together: every piece of per-cycle work is a numpy operation over
the input VCs, output VCs or ports that have something to do, never a Python loop
over flits or routers.

Index conventions (local to the shard): router ``l``; port ``p`` (topology.PORTS);
input VC ``i = (l * PORTS + p) * vcs + v``; output VC ``(l * PORTS + o) * vcs + w`` is
the buffer-state of VC ``w`` of the input port that output ``o`` feeds. Global ids
use the global router id in place of ``l``; only boundary traffic carries them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim.noc import topology as topo
from sim.network import NETWORKS, LinkCounts
from sim.noc.arbiter import GroupArgmin
from sim.noc.boundary import FlitBoundary, split_flits
from sim.noc.events import Calendar
from sim.noc.params import NocParams
from sim.noc.traffic import creations

HEAD, TAIL = 1, 2
# output-port kinds
EJECT, LOCAL_LINK, REMOTE_LINK, NO_LINK = 0, 1, 2, 3
# input-port kinds
INJECT = 0

_EMPTY = np.zeros(0, dtype=np.int64)
_CHUNK = 512  # cycles of packet creations generated at a time


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


@NETWORKS.register("cycle")
class NocShard:
    """Routers of one rectangular region, advanced cycle by cycle."""

    boundary = FlitBoundary

    def __init__(self, params: NocParams, region: topo.Region, record_ejections: bool = False,
                 measure: bool = True):
        """``record_ejections``: keep (packet id, cycle) of every packet delivered, for a
        caller that offers its own packets (``offer``) and collects them (``take_ejected``).
        ``measure`` is accepted for the NetworkShard interface; the window statistics of
        this model cost little and are always kept."""
        p = self.p = params
        self.record_ejections = record_ejections
        self._delivered: list[tuple[np.ndarray, np.ndarray]] = []
        self.region = region
        self.grid = grid = topo.Grid(p.rows, p.cols, p.torus)
        P, V, B = topo.PORTS, p.vcs, p.vc_buffers
        self.P, self.V, self.B, self.PV = P, V, B, P * V
        N = self.N = grid.n
        self.routers = region.routers(p.cols)
        nl = self.nl = len(self.routers)
        self.local_of = np.full(N, -1, dtype=np.int64)
        self.local_of[self.routers] = np.arange(nl)
        NI = self.NI = nl * P * V
        self._ar = np.arange(max(NI, nl * V, 64), dtype=np.int64)

        # ---- wiring (static): what each output port feeds, where each input port's credits go
        ports = np.arange(P)
        nbr = grid.neighbor(self.routers[:, None], ports[None, :])  # [nl, P] global id or -1
        nbr_local = np.where(nbr >= 0, self.local_of[np.maximum(nbr, 0)], -1)
        kind = np.full((nl, P), NO_LINK, dtype=np.int8)
        kind[:, 0] = EJECT
        kind[(nbr >= 0) & (nbr_local >= 0)] = LOCAL_LINK
        kind[(nbr >= 0) & (nbr_local < 0)] = REMOTE_LINK
        self.out_kind = kind.ravel()
        self.has_remote = bool((kind == REMOTE_LINK).any())
        opp = topo.OPPOSITE[ports][None, :]
        # links come in twins, so output port o's downstream input port and input port
        # o's upstream output port are both "port OPPOSITE[o] of the neighbour across o"
        twin = np.where(kind == REMOTE_LINK, (np.maximum(nbr, 0) * P + opp) * V,
                        (np.maximum(nbr_local, 0) * P + opp) * V)
        vv = np.arange(V)
        per_vc = lambda a: (np.repeat(a.ravel(), V).reshape(-1, V) + vv).ravel()  # noqa: E731
        self.down_ivc = per_vc(twin)  # output VC -> input VC it feeds (global id if remote)
        self.ovc_remote = np.repeat(self.out_kind == REMOTE_LINK, V)
        src_credit = (NI + np.arange(nl)[:, None] * V + vv).ravel()  # sources' injection VCs
        self.up_credit = per_vc(twin)  # input VC -> credit counter upstream
        self.up_credit[np.repeat((kind == EJECT).ravel(), V)] = src_credit
        self.ivc_inject = np.repeat((kind == EJECT).ravel(), V)
        self.ivc_remote = self.ovc_remote
        self.nbr_global = nbr.ravel()
        ar = self._ar[:NI]
        self.ivc_ip = ar // V  # input port id l * P + p
        self.ivc_v = ar % V
        self.ivc_pin = (ar // V) % P
        self.ivc_inl = ar % (P * V)
        self.ivc_route = (ar // (P * V)) * N  # row of the route table
        # route_op[l * N + dst]: output port id (l * P + o) a head at router l takes to dst
        self.route_op = grid.route_table(self.routers, offset=np.arange(nl) * P).ravel()
        self.op_port = np.arange(nl * P) % P
        self.op_pv = self.op_port * V
        self.mod_b = np.arange(2 * B) % B
        self.next_b = (np.arange(B) + 1) % B
        # Round-robin pointers are stored negated (size - ptr), so a request's priority
        # (index - ptr) mod size is a lookup mod_x[index + nptr]: no integer division
        self.mod_p = np.arange(2 * P) % P
        self.mod_v = np.arange(2 * V) % V
        self.mod_pv = np.arange(2 * P * V) % (P * V)
        self.nnext_p = P - (np.arange(P) + 1) % P  # negated pointer just past index i
        self.nnext_v = V - (np.arange(V) + 1) % V
        self.nnext_pv = P * V - (np.arange(2 * P * V) + 1) % (P * V)
        # first free VC of a port in cyclic order from ``start``: first_free[mask * V + start]
        if V > 16:
            raise ValueError("at most 16 virtual channels per port are supported")
        masks = np.arange(1 << V)[:, None, None]
        order = (np.arange(V)[None, :, None] + np.arange(V)[None, None, :]) % V  # [start, k]
        free = (masks >> order) & 1  # [mask, start, k]
        first = free.argmax(axis=2)
        self.first_free = np.where(free.any(axis=2), order[0][np.arange(V)[None, :], first], -1).ravel()
        self.vc_bit = 1 << np.arange(V)

        # ---- input VCs: ring buffers and per-VC allocation state
        self.q_head = np.zeros(NI, dtype=np.int64)
        self.q_count = np.zeros(NI, dtype=np.int64)
        self.buf_pkt = np.zeros(NI * B, dtype=np.int64)
        self.buf_dst = np.zeros(NI * B, dtype=np.int64)
        self.buf_flag = np.zeros(NI * B, dtype=np.int64)
        self.out_op = np.zeros(NI, dtype=np.int64)  # output port id l * P + o
        self.out_vc = np.zeros(NI, dtype=np.int64)
        self.va_ready = np.zeros(NI, dtype=np.int64)
        self.sa_ready = np.zeros(NI, dtype=np.int64)
        self.va_in_nptr = np.full(NI, P * V, dtype=np.int64)
        self.va_pending = _EMPTY  # input VCs waiting for VC allocation
        self.sa_set = _EMPTY  # active input VCs holding at least one flit
        self._mark = np.zeros(NI, dtype=bool)
        # ---- output VCs, then the sources' injection VCs: one credit array for both
        # bit w of free_vcs[l * P + o] set <=> output VC w of that port is not allocated
        self.free_vcs = np.where(self.out_kind == NO_LINK, 0, (1 << V) - 1).astype(np.int64)
        self.credit = np.full(NI + nl * V, B, dtype=np.int64)
        self.credit[:NI][np.repeat(self.out_kind == NO_LINK, V)] = 0
        self.va_out_nptr = np.full(NI, P * V, dtype=np.int64)
        self.sa_in_nptr = np.full(nl * P, P, dtype=np.int64)
        self.sa_vc_noff = np.full(nl * P, V, dtype=np.int64)
        self.sa_out_nptr = np.full(nl * P, P, dtype=np.int64)
        self.arb_ovc = GroupArgmin(NI)
        self.arb_in = GroupArgmin(nl * P)
        self.arb_out = GroupArgmin(nl * P)
        if p.torus:  # dateline class -> the VCs it may use (lower or upper half)
            self._class_bits = np.array([(1 << (V // 2)) - 1, ((1 << V) - 1) ^ ((1 << (V // 2)) - 1)])

        # ---- sources: an infinite FIFO of packets per node, one flit per cycle into port 0
        self.Q = 16
        self.sq_pkt = np.zeros(nl * self.Q, dtype=np.int64)
        self.sq_dst = np.zeros(nl * self.Q, dtype=np.int64)
        self.sq_len = np.zeros(nl * self.Q, dtype=np.int64)
        self.sq_head = np.zeros(nl, dtype=np.int64)
        self.sq_count = np.zeros(nl, dtype=np.int64)
        self.src_flit = np.zeros(nl, dtype=np.int64)
        self.src_vc = np.full(nl, -1, dtype=np.int64)
        self.inj_in_use = np.zeros(nl * V, dtype=bool)
        self.inj_last_vc = np.zeros(nl, dtype=np.int64)
        self._chunk_end = 0
        self._cre = (_EMPTY, _EMPTY, _EMPTY)
        self._cre_pos = 0
        self._chunk_cycles = max(16, min(_CHUNK, (1 << 20) // nl))  # ~1M random draws a chunk
        self._script = (_EMPTY, _EMPTY, _EMPTY, _EMPTY)  # offered packets: cycle, node, dst, flits
        self._script_pos = 0
        self._single_flit = p.packet_flits == 1

        # ---- event calendars
        self.flits = Calendar(4)  # (input VC, packet, destination, flags)
        self.credits = Calendar(1)  # index into self.credit
        self.buffered = 0
        self.queued = 0  # packets in source queues
        self.queued_flits = 0
        self.t = 0

        # ---- measurement
        self.w0 = p.warmup_cycles
        self.w1 = p.warmup_cycles + p.measure_cycles
        self.pkt_lo, self.pkt_hi = self.w0 * N, self.w1 * N
        self.horizon = self.w1 + p.drain_cycles
        size = self.horizon + 4 * (p.flit_delay + p.credit_return) + 4 * _CHUNK
        self.created_flits = np.zeros(size, dtype=np.int64)
        self.ejected_flits = np.zeros(size, dtype=np.int64)
        self.measured_created = 0
        self.measured_ejected = 0
        self._inj_rec: list[tuple[np.ndarray, ...]] = []
        self._ej_rec: list[tuple[np.ndarray, ...]] = []
        self.flit_latency_sum = 0
        self.flit_latency_count = 0
        self.measured_hops = 0
        self.window_created_by_src = np.zeros(N, dtype=np.int64)
        self.window_ejected_by_src = np.zeros(N, dtype=np.int64)
        self.link_flits = np.zeros(nl * P, dtype=np.int64)  # over the measurement window
        self.link_flits_total = np.zeros(nl * P, dtype=np.int64)  # over the whole run
        self._link_log: list[np.ndarray] = []  # link traversals in the window, counted in batches
        self._link_log_total: list[np.ndarray] = []  # every link traversal, counted in batches
        self._hop_log: list[tuple[np.ndarray, np.ndarray]] = []
        self._out: list[FlitBoundary] = []

    # ------------------------------------------------------------------ epoch API
    def advance(self, t0: int, t1: int, inbound: FlitBoundary | None = None) -> FlitBoundary:
        """Simulate cycles [t0, t1); return the flits and credits that leave the shard."""
        if t0 < self.t:
            raise ValueError(f"shard already at cycle {self.t}, cannot restart at {t0}")
        if inbound is not None and len(inbound):
            self._accept(inbound, t0)
        self._out = []
        t = t0
        while t < t1:
            if self.buffered == 0 and self.queued == 0:
                nxt = self._next_event_time(t)
                if nxt >= t1:
                    break
                t = int(nxt)
            self._cycle(t)
            t += 1
        self.t = t1
        out = FlitBoundary.concat(self._out)
        self._out = []
        if len(out) and out.earliest() < t1:
            raise RuntimeError(
                f"boundary traffic due at cycle {out.earliest():.0f} inside the epoch ending at {t1}: "
                "the epoch is longer than the lookahead"
            )
        return out

    def next_event(self) -> float:
        """Earliest cycle >= self.t at which this shard has something to do."""
        if self.buffered or self.queued:
            return float(self.t)
        return self._next_event_time(self.t)

    def _next_event_time(self, t: int) -> float:
        scripted = self._script[0]
        nxt = float(scripted[self._script_pos]) if self._script_pos < len(scripted) else float("inf")
        return min(self.flits.next_time(), self.credits.next_time(), self._next_creation(t), nxt)

    def deliver(self, b: FlitBoundary) -> None:
        """Take boundary traffic into the calendars without advancing (e.g. when stopping)."""
        if len(b):
            self._accept(b, self.t)

    def _accept(self, b: FlitBoundary, t0: int) -> None:
        PV = self.PV
        if len(b.flit_cycle):
            if b.flit_cycle.min() < t0:
                raise RuntimeError("inbound flit due before the epoch start")
            g = b.flit_ivc // PV
            ivc = self.local_of[g] * PV + (b.flit_ivc - g * PV)
            self.flits.push_many(b.flit_cycle, ivc, b.flit_pkt, b.flit_dst, b.flit_flag)
        if len(b.credit_cycle):
            g = b.credit_ovc // PV
            ovc = self.local_of[g] * PV + (b.credit_ovc - g * PV)
            self.credits.push_many(b.credit_cycle, ovc)

    # ------------------------------------------------------------------ one cycle
    def _cycle(self, t: int) -> None:
        while t + self.p.flit_delay >= len(self.created_flits):  # a skip-ahead may jump far
            self._grow_stats()
        ev = self.credits.pop(t)
        if ev is not None:
            self.credit[ev[0]] += 1  # at most one credit per counter per cycle
        ev = self.flits.pop(t)
        if ev is not None:
            self._receive(t, *ev)
        if self.va_pending.size:
            self._vc_allocate(t)
        if self.sa_set.size:
            self._switch_allocate(t)
        self._inject(t)

    def _receive(self, t, ivc, pkt, dst, flag) -> None:
        """Write arriving flits into their input VCs; a flit reaching the front starts work."""
        B = self.B
        cnt = self.q_count[ivc]
        slot = ivc * B + self.mod_b[self.q_head[ivc] + cnt]
        self.buf_pkt[slot] = pkt
        self.buf_dst[slot] = dst
        self.buf_flag[slot] = flag
        self.q_count[ivc] = cnt + 1
        n = len(ivc)
        self.buffered += n
        front = cnt == 0
        nf = _nz(front)
        if not nf:
            return
        if nf < n:
            ivc, dst, flag = ivc[front], dst[front], flag[front]
        is_head = (flag & HEAD) != 0
        nh = _nz(is_head)
        if nh == nf:  # heads at the front of idle VCs: route (one lookup) and bid for a VC
            self._start_vc_alloc(ivc, dst, t + self.p.routing_delay)
            return
        if nh:
            self._start_vc_alloc(ivc[is_head], dst[is_head], t + self.p.routing_delay)
            ivc = ivc[~is_head]
        # body flits reaching an empty active VC may bid for the switch at once
        self.sa_ready[ivc] = t
        self.sa_set = np.concatenate((self.sa_set, ivc))

    def _start_vc_alloc(self, ivc, dst, ready) -> None:
        self.out_op[ivc] = self.route_op[self.ivc_route[ivc] + dst]
        self.va_ready[ivc] = ready
        self.va_pending = np.concatenate((self.va_pending, ivc))

    def _drop(self, members: np.ndarray, gone: np.ndarray) -> np.ndarray:
        """``members`` without the ids in ``gone`` (set difference via a scratch mask)."""
        mark = self._mark
        mark[gone] = True
        out = members[~mark[members]]
        mark[gone] = False
        return out

    def _vc_allocate(self, t: int) -> None:
        """Separable input-first VC allocation, one iteration, round-robin arbiters."""
        pend = self.va_pending
        ready = self.va_ready[pend] <= t
        c = pend if _nz(ready) == len(pend) else pend[ready]
        if not c.size:
            return
        V, PV = self.V, self.PV
        op = self.out_op[c]
        bits = self.free_vcs[op]
        if self.p.torus:
            bits = bits & self._dateline_bits(c, op)
        # input stage: each input VC takes the first free output VC of its port in
        # round-robin order over (port, vc) from its pointer; inside one port that is
        # cyclic from the pointer if it points into the port, else from VC 0
        rel = (PV - self.va_in_nptr[c]) - self.op_pv[op]
        start = np.where(rel.astype(np.uint64) < V, rel, 0)
        pick = self.first_free[bits * V + start]
        ok = pick >= 0
        if _nz(ok) < len(c):
            c, op, pick = c[ok], op[ok], pick[ok]
            if not c.size:
                return
        target = op * V + pick
        inl = self.ivc_inl[c]
        # output stage: each output VC grants one of the input VCs that picked it
        win = self.arb_ovc.winners(target, self.mod_pv[inl + self.va_out_nptr[target]], self._ar)
        if _nz(win) < len(c):
            c, op, pick, target, inl = c[win], op[win], pick[win], target[win], inl[win]
        np.subtract.at(self.free_vcs, op, self.vc_bit[pick])  # clear the granted VCs' bits
        self.out_vc[c] = target
        self.sa_ready[c] = t + self.p.vc_alloc_delay
        self.va_in_nptr[c] = self.nnext_pv[self.op_pv[op] + pick]
        self.va_out_nptr[target] = self.nnext_pv[inl]
        self.va_pending = self._drop(pend, c)
        self.sa_set = np.concatenate((self.sa_set, c))

    def _dateline_bits(self, c, op) -> np.ndarray:
        """VCs a head may take on a torus: the half of its dateline class (all at the terminal)."""
        slot = c * self.B + self.q_head[c]
        src = self.buf_pkt[slot] % self.N
        o = self.op_port[op]
        nxt = self.nbr_global[op]
        cls = self.grid.dateline_class(np.maximum(nxt, 0), src, o)
        return np.where(o == topo.LOCAL, (1 << self.V) - 1, self._class_bits[cls])

    def _switch_allocate(self, t: int) -> None:
        """Separable input-first switch allocation; winners leave their buffers this cycle."""
        s = self.sa_set
        ov = self.out_vc[s]
        ok = (self.sa_ready[s] <= t) & (self.credit[ov] > 0)
        n = _nz(ok)
        if not n:
            return
        c = s if n == len(s) else s[ok]
        if n < len(s):
            ov = ov[ok]
        V, B = self.V, self.B
        ar = self._ar
        ip = self.ivc_ip[c]
        v = self.ivc_v[c]
        op = self.out_op[c]
        o = self.op_port[op]
        # input stage: one VC per input port; round robin over outputs, then over VCs
        key = self.mod_p[o + self.sa_in_nptr[ip]] * V + self.mod_v[v + self.sa_vc_noff[ip]]
        win = self.arb_in.winners(ip, key, ar)
        if _nz(win) < n:
            c, ip, v, o, ov, op = c[win], ip[win], v[win], o[win], ov[win], op[win]
        pin = self.ivc_pin[c]
        # output stage: one input port per output port
        win = self.arb_out.winners(op, self.mod_p[pin + self.sa_out_nptr[op]], ar)
        if _nz(win) < len(c):
            c, ip, v, o, ov, op, pin = c[win], ip[win], v[win], o[win], ov[win], op[win], pin[win]
        self.sa_in_nptr[ip] = self.nnext_p[o]
        self.sa_vc_noff[ip] = self.nnext_v[v]
        self.sa_out_nptr[op] = self.nnext_p[pin]

        # dequeue the winning flits
        head = self.q_head[c]
        slot = c * B + head
        pk, ds, fl = self.buf_pkt[slot], self.buf_dst[slot], self.buf_flag[slot]
        self.q_head[c] = self.next_b[head]
        cnt = self.q_count[c] - 1
        self.q_count[c] = cnt
        n = len(c)
        self.buffered -= n
        self.credit[ov] -= 1
        tail = fl >= TAIL
        nt = _nz(tail)
        if nt:
            if nt == n:
                tc, tcnt, tov, top = c, cnt, ov, op
            else:
                tc, tcnt, tov, top = c[tail], cnt[tail], ov[tail], op[tail]
            # an output VC is free again once the tail is sent
            np.add.at(self.free_vcs, top, self.vc_bit[tov - top * V])  # its bit was clear
            waiting = tcnt > 0
            if _nz(waiting):  # the next packet's head already waits behind the tail
                nxt = tc[waiting]
                nslot = nxt * B + self.q_head[nxt]
                self._start_vc_alloc(nxt, self.buf_dst[nslot], t + 1 + self.p.routing_delay)
            leave = tail | (cnt == 0) if nt < n else tail
        else:
            leave = cnt == 0
        if nt < n:
            self.sa_ready[c] = t + 1  # the next flit of a packet may go next cycle
        if _nz(leave):
            self.sa_set = self._drop(self.sa_set, c if nt == n else c[leave])
        self._return_credits(t, c)
        self._forward(t, o, op, ov, pk, ds, fl)

    def _return_credits(self, t, c) -> None:
        """Each flit leaving an input buffer frees a slot: its credit goes upstream."""
        p = self.p
        tgt = self.up_credit[c]
        if self.has_remote:
            rem = self.ivc_remote[c]
            if _nz(rem):
                self._out.append(FlitBoundary(credit_cycle=np.full(_nz(rem), t + p.credit_return),
                                          credit_ovc=tgt[rem]))
                c, tgt = c[~rem], tgt[~rem]
        inj = self.ivc_inject[c]
        ni = _nz(inj)
        if ni == 0:
            self.credits.push(t + p.credit_return, tgt)
        elif ni == len(c):
            self.credits.push(t + p.inject_credit_return, tgt)
        else:
            self.credits.push(t + p.inject_credit_return, tgt[inj])
            self.credits.push(t + p.credit_return, tgt[~inj])

    def _forward(self, t, o, op, ov, pk, ds, fl) -> None:
        """Winning flits traverse the switch and the link (or reach their terminal)."""
        p = self.p
        arrive = t + p.flit_delay
        ej = o == topo.LOCAL
        n_ej = _nz(ej)
        if n_ej:
            if n_ej == len(o):
                self._eject(t, arrive, ov, pk, fl, n_ej)
                return
            self._eject(t, arrive, ov[ej], pk[ej], fl[ej], n_ej)
            link = ~ej
            op, ov, pk, ds, fl = op[link], ov[link], pk[link], ds[link], fl[link]
        self._link_log_total.append(op)
        if len(self._link_log_total) >= 64:
            self._flush_link_log()
        if t >= self.w0:
            # link use is counted inside the window; hops of measured packets at any time
            if t < self.w1:
                self._link_log.append(op)
            if (t < self.w1 or self.measured_ejected < self.measured_created) and t < self.horizon:
                self._hop_log.append((pk, fl))
            if len(self._hop_log) >= 64:
                self._flush_link_log()
        ivc = self.down_ivc[ov]
        if self.has_remote:
            rem = self.ovc_remote[ov]
            nr = _nz(rem)
            if nr:
                self._out.append(FlitBoundary(np.full(nr, arrive), ivc[rem], pk[rem], ds[rem], fl[rem]))
                keep = ~rem
                ivc, pk, ds, fl = ivc[keep], pk[keep], ds[keep], fl[keep]
        self.flits.push(arrive, ivc, pk, ds, fl)

    def _eject(self, t, arrive, ov, pk, fl, n) -> None:
        """Flits reaching their terminal, which sinks them and returns the credit at once."""
        self.ejected_flits[arrive] += n
        self.credits.push(t + self.p.eject_credit_return, ov)
        if self.record_ejections:
            tails = pk[fl >= TAIL]
            if tails.size:
                self._delivered.append((tails, np.full(len(tails), arrive)))
        if self.w0 <= arrive < self.w1:
            np.add.at(self.window_ejected_by_src, pk % self.N, 1)
        if arrive < self.w0 or arrive >= self.horizon:  # a saturated run is cut at the horizon
            return
        meas = (pk >= self.pkt_lo) & (pk < self.pkt_hi)
        nm = _nz(meas)
        if nm:
            mp, mf = (pk, fl) if nm == n else (pk[meas], fl[meas])
            self.flit_latency_sum += nm * arrive - int((mp // self.N).sum())
            self.flit_latency_count += nm
            tails = mp[mf >= TAIL]
            if tails.size:
                self.measured_ejected += len(tails)
                self._ej_rec.append((tails, np.full(len(tails), arrive)))

    # ------------------------------------------------------------------ sources
    def _next_creation(self, t: int) -> float:
        while True:
            cyc = self._cre[0]
            if self._cre_pos < len(cyc):
                return float(cyc[self._cre_pos])
            if self._chunk_end > self.horizon or self.p.packet_rate <= 0:
                return float("inf")
            self._new_chunk(self._chunk_end)

    def _new_chunk(self, start: int) -> None:
        end = start + self._chunk_cycles
        cyc, src, dst = creations(self.p, self.routers, start, end)
        self._cre = (cyc, self.local_of[src], dst)
        self._cre_pos = 0
        self._chunk_end = end

    def _inject(self, t: int) -> None:
        while t >= self._chunk_end:  # chunks tile time with no gaps
            self._new_chunk(self._chunk_end)
        cyc = self._cre[0]
        i0 = self._cre_pos
        if i0 < len(cyc) and cyc[i0] <= t:
            if cyc[i0] < t:
                raise RuntimeError(f"packets created at cycle {cyc[i0]} were skipped")
            i1 = i0 + int(np.searchsorted(cyc[i0:i0 + self.nl + 1], t, side="right"))
            self._cre_pos = i1
            self._enqueue(t, self._cre[1][i0:i1], self._cre[2][i0:i1], self.p.packet_flits)
        scy = self._script[0]
        j0 = self._script_pos
        if j0 < len(scy) and scy[j0] <= t:
            j1 = j0 + int(np.searchsorted(scy[j0:j0 + self.nl + 1], t, side="right"))
            self._script_pos = j1
            self._enqueue(t, self._script[1][j0:j1], self._script[2][j0:j1], self._script[3][j0:j1])
        if self.queued:
            if self._single_flit:
                self._send_single_flit(t)
            else:
                self._send_from_sources(t)

    def _enqueue(self, t, nodes, dst, length) -> None:
        """New packets join their source queue (infinite FIFO, as BookSim2's)."""
        k = len(nodes)
        cnt = self.sq_count[nodes]
        if _nz(cnt >= self.Q):
            self._grow_queues()
            cnt = self.sq_count[nodes]
        slot = nodes * self.Q + (self.sq_head[nodes] + cnt) % self.Q
        self.sq_pkt[slot] = t * self.N + self.routers[nodes]
        self.sq_dst[slot] = dst
        self.sq_len[slot] = length
        self.sq_count[nodes] = cnt + 1
        self.queued += k
        flits = int(np.sum(length)) if not np.isscalar(length) else k * int(length)
        self.queued_flits += flits
        self.created_flits[t] += flits
        if self.w0 <= t < self.w1:
            self.measured_created += k
            np.add.at(self.window_created_by_src, self.routers[nodes], length)

    def _grow_queues(self) -> None:
        nl, Q = self.nl, self.Q
        idx = np.arange(nl)[:, None] * Q + (self.sq_head[:, None] + np.arange(Q)[None, :]) % Q
        old = [a[idx] for a in (self.sq_pkt, self.sq_dst, self.sq_len)]
        self.Q = Q * 2
        grown = []
        for a in old:
            g = np.zeros((nl, self.Q), dtype=np.int64)
            g[:, :Q] = a
            grown.append(g.ravel())
        self.sq_pkt, self.sq_dst, self.sq_len = grown
        self.sq_head[:] = 0

    def _pick_injection_vc(self, n: np.ndarray, usable: np.ndarray):
        """Round robin over the injection port's VCs, starting after the last one used."""
        V = self.V
        key = (self._ar[:V] - self.inj_last_vc[n][:, None] - 1) % V
        key[~usable] = V
        pick = key.argmin(axis=1)
        return pick, key[self._ar[: len(n)], pick] < V

    def _send_single_flit(self, t: int) -> None:
        """Sources with 1-flit packets: a VC is taken and released by the same flit."""
        V = self.V
        n = np.flatnonzero(self.sq_count)
        usable = self.credit[self.NI:].reshape(-1, V)[n] > 0
        pick, ok = self._pick_injection_vc(n, usable)
        if _nz(ok) < len(n):
            n, pick = n[ok], pick[ok]
            if not n.size:
                return
        self._dequeue_and_send(t, n, pick, self.sq_head[n], HEAD | TAIL)
        self.inj_last_vc[n] = pick

    def _send_from_sources(self, t: int) -> None:
        """Each node with a waiting packet sends one flit into its router, credit permitting."""
        V = self.V
        n = np.flatnonzero(self.sq_count)
        vc = self.src_vc[n]
        need = vc < 0
        if _nz(need):  # a head takes a free, non-full VC, round robin after the last one used
            nn = n[need]
            idx = nn[:, None] * V + self._ar[:V]
            usable = ~self.inj_in_use[idx] & (self.credit[self.NI + idx] > 0)
            pick, got = self._pick_injection_vc(nn, usable)
            vc[need] = np.where(got, pick, -1)
        go = vc >= 0
        s, sv = n[go], vc[go]
        credit = self.credit[self.NI + s * V + sv] > 0
        if _nz(credit) < len(s):
            s, sv = s[credit], sv[credit]
        if not s.size:
            return
        fi = self.src_flit[s]
        is_head = fi == 0
        is_tail = fi == self.sq_len[s * self.Q + self.sq_head[s]] - 1
        fl = is_head * HEAD + is_tail * TAIL
        if _nz(is_head):
            h, hv = s[is_head], sv[is_head]
            self.src_vc[h] = hv
            self.inj_in_use[h * V + hv] = True
            self.inj_last_vc[h] = hv
        if _nz(is_tail):
            tl = s[is_tail]
            self.inj_in_use[tl * V + sv[is_tail]] = False
            self.src_vc[tl] = -1
            self.src_flit[tl] = 0
        body = ~is_tail
        if _nz(body):
            self.src_flit[s[body]] += 1
        self._dequeue_and_send(t, s, sv, self.sq_head[s], fl, pop=is_tail)

    def _dequeue_and_send(self, t, s, sv, qh, fl, pop=None) -> None:
        """Send the front flit of each source ``s`` on VC ``sv``; ``pop`` marks tails."""
        slot = s * self.Q + qh
        pk, ds = self.sq_pkt[slot], self.sq_dst[slot]
        self.credit[self.NI + s * self.V + sv] -= 1
        self.queued_flits -= len(s)
        heads = pk if pop is None else pk[(fl & HEAD) != 0]
        if (t < self.horizon and self.pkt_lo <= heads.max(initial=-1)
                and heads.min(initial=self.pkt_hi) < self.pkt_hi):
            meas = (heads >= self.pkt_lo) & (heads < self.pkt_hi)
            if _nz(meas):
                hd = ds if pop is None else ds[(fl & HEAD) != 0]
                self._inj_rec.append((heads[meas], hd[meas], np.full(_nz(meas), t)))
        gone = s if pop is None else s[pop]
        if gone.size:
            self.sq_head[gone] = (self.sq_head[gone] + 1) % self.Q
            self.sq_count[gone] -= 1
            self.queued -= len(gone)
        flags = np.full(len(s), fl) if np.isscalar(fl) else fl
        self.flits.push(t + self.p.inject_delay, s * self.PV + sv, pk, ds, flags)

    def _flush_link_log(self) -> None:
        """Count logged link traversals: flits per link, and hops of measured head flits."""
        if self._link_log:
            op = np.concatenate(self._link_log)
            self.link_flits += np.bincount(op, minlength=len(self.link_flits))
            self._link_log = []
        if self._link_log_total:
            op = np.concatenate(self._link_log_total)
            self.link_flits_total += np.bincount(op, minlength=len(self.link_flits))
            self._link_log_total = []
        if self._hop_log:
            pk, fl = (np.concatenate([e[i] for e in self._hop_log]) for i in range(2))
            self.measured_hops += _nz(((fl & HEAD) != 0) & (pk >= self.pkt_lo) & (pk < self.pkt_hi))
            self._hop_log = []

    def _grow_stats(self) -> None:
        extra = np.zeros(len(self.created_flits), dtype=np.int64)
        self.created_flits = np.concatenate((self.created_flits, extra))
        self.ejected_flits = np.concatenate((self.ejected_flits, extra))

    # ------------------------------------------------------------------ results
    def _measured(self) -> dict:
        """The NocReport fields both NoC models measure the same way (packet records,
        latency sums, hops, per-source window counts)."""
        def cat(recs, i):
            return np.concatenate([r[i] for r in recs]) if recs else _EMPTY

        return dict(
            created_flits=self.created_flits,
            inject_pkt=cat(self._inj_rec, 0),
            inject_dst=cat(self._inj_rec, 1),
            inject_cycle=cat(self._inj_rec, 2),
            eject_pkt=cat(self._ej_rec, 0),
            eject_cycle=cat(self._ej_rec, 1),
            flit_latency_sum=self.flit_latency_sum,
            flit_latency_count=self.flit_latency_count,
            measured_hops=self.measured_hops,
            window_created_by_src=self.window_created_by_src,
            window_ejected_by_src=self.window_ejected_by_src,
        )

    def report(self) -> NocReport:
        P = self.P
        self._flush_link_log()
        used = np.flatnonzero(np.isin(self.out_kind, (LOCAL_LINK, REMOTE_LINK)))
        return NocReport(
            **self._measured(),
            ejected_flits=self.ejected_flits,
            link_router=self.routers[used // P],
            link_port=used % P,
            link_flits=self.link_flits[used],
            flits_buffered=self.buffered,
            flits_queued=self.queued_flits,
            flits_in_flight=self.flits.pending(),
        )

    def offer(self, cycles, src, dst, flits=None) -> None:
        """Script packets: ``src`` (global router ids in this shard) creates a packet to
        ``dst`` of ``flits`` flits at each cycle. At most one packet per node per cycle,
        counting the synthetic ones; cycles must not lie in the past."""
        cycles = np.asarray(cycles, dtype=np.int64)
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        flits = np.full(len(cycles), self.p.packet_flits) if flits is None else np.asarray(flits, dtype=np.int64)
        if len(cycles) and cycles.min() < self.t:
            raise ValueError(f"cannot offer packets at cycle {cycles.min()}: shard is at cycle {self.t}")
        if (self.local_of[src] < 0).any():
            raise ValueError("offered packets must start at routers of this shard")
        if ((dst < 0) | (dst >= self.N)).any() or (flits < 1).any():
            raise ValueError("offered packets need destinations inside the grid and at least one flit")
        pos = self._script_pos
        old = [a[pos:] for a in self._script]
        merged = [np.concatenate((o, n)) for o, n in zip(old, (cycles, self.local_of[src], dst, flits))]
        order = np.lexsort((merged[1], merged[0]))
        self._script = tuple(m[order] for m in merged)
        self._script_pos = 0
        if (flits > 1).any():
            self._single_flit = False

    def take_ejected(self) -> tuple[np.ndarray, np.ndarray]:
        """(packet ids, cycles their tails reached the destination terminal) since the last
        call; a packet id is ``creation cycle * nodes + source``. Needs record_ejections."""
        if not self._delivered:
            return _EMPTY, _EMPTY
        pk = np.concatenate([d[0] for d in self._delivered])
        cyc = np.concatenate([d[1] for d in self._delivered])
        self._delivered = []
        return pk, cyc

    def counters(self) -> tuple[int, int]:
        """(measured packets created, measured packets whose tail has been ejected)."""
        return self.measured_created, self.measured_ejected

    def link_totals(self) -> LinkCounts:
        """Flits over every router-to-router link of the shard, over the whole run."""
        self._flush_link_log()
        used = np.flatnonzero(np.isin(self.out_kind, (LOCAL_LINK, REMOTE_LINK)))
        return LinkCounts(self.routers[used // self.P], used % self.P, self.link_flits_total[used])

    @classmethod
    def split(cls, out: FlitBoundary, owner: np.ndarray, params: NocParams, shards: int) -> list[FlitBoundary]:
        return split_flits(out, owner, params.vcs, shards)


_nz = np.count_nonzero
