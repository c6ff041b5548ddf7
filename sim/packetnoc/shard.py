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

Bids that fall in the same window of at most ``hop`` cycles cannot cause one another
(a packet's next bid is a hop later; a window's new packets are injected first), so
each window is one vectorised batch: group by output link, order by (bid cycle, static
input-port id) and serve with a max-plus scan (reserve.py). The same packet order holds whatever the shard cut, so results are
bit-identical for any shard count. The API mirrors NocShard (offer, advance,
take_ejected, next_event, deliver, report, counters) so the two fidelities are
interchangeable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import heapq

import numpy as np

from sim.noc import topology as topo
from sim.noc.params import NocParams
from sim.network import NETWORKS, LinkCounts
from sim.noc.shard import NocShard, NocReport
from sim.packetnoc.boundary import PacketBoundary, split_packets
from sim.packetnoc.reserve import last_of_group, reserve

_EMPTY = np.zeros(0, dtype=np.int64)
_CHUNK = 512
SCALAR_BATCH = 32  # windows with at most this many bids are served in plain Python (cheaper)


def _empty():
    return _EMPTY


@NETWORKS.register("packet")
class PacketShard:
    """Routers of one rectangular region under the packet-level (link reservation) model."""

    boundary = PacketBoundary

    def __init__(self, params: NocParams, region: topo.Region, record_ejections: bool = False,
                 measure: bool = True):
        """``measure``: keep NocShard's measurement-window statistics (for ``report``); a
        caller that only offers and collects packets (the chip) turns them off."""
        p = self.p = params
        self.measure = measure
        self.record_ejections = record_ejections
        self.region = region
        self.grid = grid = topo.Grid(p.rows, p.cols, p.torus)
        P = self.P = topo.PORTS
        N = self.N = grid.n
        self.routers = region.routers(p.cols)
        nl = self.nl = len(self.routers)
        self.local_of = np.full(N, -1, dtype=np.int64)
        self.local_of[self.routers] = np.arange(nl)
        self.route_op = grid.route_table(self.routers, offset=np.arange(nl) * P).ravel().astype(np.int64)
        nbr = grid.neighbor(self.routers[:, None], np.arange(P)[None, :]).ravel()
        self.nbr = nbr  # global router across output port id (l * P + o), -1 at the terminal/edge
        self.nbr_local = np.where(nbr >= 0, self.local_of[np.maximum(nbr, 0)], -1)
        self.in_port_of = np.tile(topo.OPPOSITE, nl)  # input port a head arrives on downstream
        self.link_free = np.zeros(nl * P, dtype=np.int64)
        self.inj_free = np.zeros(nl, dtype=np.int64)
        self.bid_delay = p.routing_delay + p.vc_alloc_delay
        self.hop = p.flit_delay + self.bid_delay
        self.first_bid = p.inject_delay + self.bid_delay
        # bids inside one window cannot cause each other (a bid's next bid is a hop later);
        # injections are handled first in a window, so their first bids may fall inside it
        self.window = max(1, self.hop)
        # pending bids, a heap of (cycle, global input-port id, packet, local router,
        # destination, flits): (cycle, port) is unique, so the order is total
        self.bag: list[tuple[int, int, int, int, int, int]] = []
        self._nbr_local = self.nbr_local.tolist()
        self._next_port = (self.nbr * P + self.in_port_of).tolist()
        self._port_bits = int(N * P).bit_length()
        self._win_bits = int(self.window).bit_length()
        self.pending_flits = 0
        self.t = 0
        self._delivered: list[tuple[np.ndarray, np.ndarray]] = []
        self._script = (_EMPTY, _EMPTY, _EMPTY, _EMPTY)
        self._script_pos = 0
        self._cre = (_EMPTY, _EMPTY, _EMPTY)
        self._cre_pos = 0
        self._chunk_end = 0
        self._chunk_cycles = max(16, min(_CHUNK, (1 << 20) // nl))

        # measurement (NocShard's definitions, so cluster.noc_summary applies unchanged)
        self.w0 = p.warmup_cycles
        self.w1 = p.warmup_cycles + p.measure_cycles
        self.pkt_lo, self.pkt_hi = self.w0 * N, self.w1 * N
        self.horizon = self.w1 + p.drain_cycles
        self.created_flits = np.zeros(self.horizon + 4 * _CHUNK, dtype=np.int64)
        self.ejected_diff = np.zeros(self.horizon + 4 * _CHUNK, dtype=np.int64)
        self.measured_created = 0
        self.measured_ejected = 0
        self.flit_latency_sum = 0
        self.flit_latency_count = 0
        self.measured_hops = 0
        self.window_created_by_src = np.zeros(N, dtype=np.int64)
        self.window_ejected_by_src = np.zeros(N, dtype=np.int64)
        self.link_flits = np.zeros(nl * P, dtype=np.int64)  # flits over the measurement window
        self.link_flits_total = np.zeros(nl * P, dtype=np.int64)  # flits over the whole run (vector path)
        self._link_total = [0] * (nl * P)  # the same, counted by the scalar path
        self._inj_rec: list[tuple[np.ndarray, ...]] = []
        self._ej_rec: list[tuple[np.ndarray, ...]] = []

    # ------------------------------------------------------------------ epoch API
    def advance(self, t0: int, t1: int, inbound: PacketBoundary | None = None) -> PacketBoundary:
        """Simulate cycles [t0, t1); return the heads that bid in other shards."""
        if t0 < self.t:
            raise ValueError(f"shard already at cycle {self.t}, cannot restart at {t0}")
        if inbound is not None and len(inbound):
            self._accept(inbound, t0)
        out: list[PacketBoundary] = []
        t = t0
        while t < t1:
            nxt = self._next_event_time(t)
            if nxt >= t1:
                break
            t = max(t, int(nxt))
            u = min(t + self.window, t1)
            self._window(t, u, out)
            t = u
        self.t = t1
        res = PacketBoundary.concat(out)
        if len(res) and res.earliest() < t1:
            raise RuntimeError(f"boundary head due at cycle {res.earliest():.0f} inside the epoch ending at {t1}")
        return res

    def next_event(self) -> float:
        return self._next_event_time(self.t)

    def deliver(self, b: PacketBoundary) -> None:
        if len(b):
            self._accept(b, self.t)

    def _accept(self, b: PacketBoundary, t0: int) -> None:
        if b.cycle.min() < t0:
            raise RuntimeError("inbound head due before the epoch start")
        self._add(np.stack((b.cycle, self.local_of[b.port // self.P], b.port, b.pkt, b.dst, b.flits)))

    def _next_event_time(self, t: int) -> float:
        nxt = self.bag_min
        if self._script_pos < len(self._script[0]):
            nxt = min(nxt, float(self._script[0][self._script_pos]))
        if self.p.packet_rate > 0:
            nxt = min(nxt, self._next_creation(t))
        return nxt

    @property
    def bag_min(self) -> float:
        return self.bag[0][0] if self.bag else float("inf")

    def _add(self, rows: np.ndarray) -> None:
        """Queue bids: rows (cycle, local router, global input port, packet, destination, flits)."""
        if rows.shape[1]:
            push, bag = heapq.heappush, self.bag
            for c, lr, port, pkt, dst, fl in rows.T.tolist():
                push(bag, (c, port, pkt, lr, dst, fl))
            self.pending_flits += int(rows[5].sum())

    def _due(self, u: int) -> list[tuple]:
        """Remove and return the pending bids due before cycle ``u``."""
        bag, pop, out = self.bag, heapq.heappop, []
        while bag and bag[0][0] < u:
            out.append(pop(bag))
        return out

    # ------------------------------------------------------------------ one window
    def _window(self, t: int, u: int, out: list) -> None:
        self._inject(t, u)  # first: its bids may fall inside this window (never their consequences)
        if self.bag and self.bag[0][0] < u:
            due = self._due(u)
            if len(due) > SCALAR_BATCH:
                c, port, pkt, lr, dst, fl = np.array(due, dtype=np.int64).T
                self._grant(out, t, np.stack((c, lr, port, pkt, dst, fl)))
            else:
                self._grant_scalar(out, due)

    def _grant_scalar(self, out, due: list[tuple]) -> None:
        """_grant for a few bids, one at a time: the same order, the same arithmetic."""
        P, N, fd, hop = self.P, self.N, self.p.flit_delay, self.hop
        route, lf = self.route_op, self.link_free
        keyed = sorted((route.item(lr * N + dst), c, port, pkt, dst, fl) for c, port, pkt, lr, dst, fl in due)
        ejected, remote, starts = [], [], []
        bag, push, nloc, nport = self.bag, heapq.heappush, self._nbr_local, self._next_port
        lt = self._link_total
        for op, c, port, pkt, dst, fl in keyed:
            s = lf.item(op)
            if c > s:
                s = c
            lf[op] = s + fl
            lt[op] += fl
            starts.append(s)
            if op % P == topo.LOCAL:
                ejected.append((pkt, s + fd, fl))
                continue
            nxt = nloc[op]
            if nxt >= 0:
                push(bag, (s + hop, nport[op], pkt, nxt, dst, fl))
            else:
                remote.append((s + hop, nport[op], pkt, dst, fl))
        if self.measure:
            k = np.array(keyed, dtype=np.int64).T
            self._count_window(k[0], np.array(starts, dtype=np.int64), k[5])
            lk = k[3][k[0] % P != topo.LOCAL]
            self.measured_hops += int(np.count_nonzero((lk >= self.pkt_lo) & (lk < self.pkt_hi)))
        if remote:
            r = np.array(remote, dtype=np.int64).T
            out.append(PacketBoundary(*r))
            self.pending_flits -= int(r[4].sum())
        if ejected:
            e = np.array(ejected, dtype=np.int64).T
            self.pending_flits -= int(e[2].sum())
            self._eject(e[0], e[1], e[2])

    def _grant(self, out, t, b: np.ndarray) -> None:
        """Serve the window's bids: each output link first come first served, ties in
        (bid cycle, static input-port id) order (unique: one head per input port per cycle)."""
        p, P = self.p, self.P
        op = self.route_op[b[1] * self.N + b[4]]
        if len(op) > 1:
            key = ((op << self._win_bits) + (b[0] - t)) << self._port_bits | b[2]
            order = np.argsort(key)
            op, b = op[order], b[:, order]
        cyc, pkt, fl = b[0], b[3], b[5]
        start = reserve(op, cyc, fl, self.link_free[op])
        last = last_of_group(op)
        self.link_free[op[last]] = start[last] + fl[last]
        self.pending_flits -= int(fl.sum())
        np.add.at(self.link_flits_total, op, fl)
        if self.measure:
            self._count_window(op, start, fl)
        ej = (op % P) == topo.LOCAL
        n_ej = int(np.count_nonzero(ej))
        if n_ej:
            if n_ej == len(ej):
                self._eject(pkt, start + p.flit_delay, fl)
                return
            self._eject(pkt[ej], start[ej] + p.flit_delay, fl[ej])
            lk = ~ej
            op, b, start = op[lk], b[:, lk], start[lk]
        if self.measure:
            pk = b[3]
            self.measured_hops += int(np.count_nonzero((pk >= self.pkt_lo) & (pk < self.pkt_hi)))
        # the head bids at the next router a hop later, arriving on the opposite port
        nloc = self.nbr_local[op]
        rows = np.stack((start + self.hop, nloc, self.nbr[op] * P + self.in_port_of[op], b[3], b[4], b[5]))
        rem = nloc < 0
        if rem.any():
            r = rows[:, rem]
            out.append(PacketBoundary(r[0], r[2], r[3], r[4], r[5]))
            rows = rows[:, ~rem]
        self._add(rows)

    def _count_window(self, op, start, fl) -> None:
        """Flits of these link reservations that fall inside the measurement window."""
        lo, hi = np.maximum(start, self.w0), np.minimum(start + fl, self.w1)
        inside = np.maximum(hi - lo, 0)
        if inside.any():
            self.link_flits += np.bincount(op, weights=inside, minlength=len(self.link_flits)).astype(np.int64)

    def _eject(self, pkt, head, fl) -> None:
        tail = head + fl - 1
        if self.record_ejections:
            self._delivered.append((pkt, tail))
        if not self.measure:
            return
        self._ensure(int(tail.max()) + 2)
        np.add.at(self.ejected_diff, head, 1)
        np.add.at(self.ejected_diff, tail + 1, -1)
        src = pkt % self.N
        inside = np.maximum(np.minimum(tail + 1, self.w1) - np.maximum(head, self.w0), 0)
        if inside.any():
            np.add.at(self.window_ejected_by_src, src, inside)
        meas = (pkt >= self.pkt_lo) & (pkt < self.pkt_hi) & (tail < self.horizon)
        if meas.any():
            mp, mh, mf, mt = pkt[meas], head[meas], fl[meas], tail[meas]
            # every flit i of the packet arrives at head + i: sum of (arrival - creation)
            self.flit_latency_sum += int((mf * (mh - mp // self.N) + mf * (mf - 1) // 2).sum())
            self.flit_latency_count += int(mf.sum())
            self.measured_ejected += len(mp)
            self._ej_rec.append((mp, mt))

    # ------------------------------------------------------------------ sources
    # Synthetic packet creation and scripted packets work exactly as in NocShard, on
    # attributes of the same names: reuse its methods rather than copy them.
    _next_creation = NocShard._next_creation
    _new_chunk = NocShard._new_chunk
    offer = NocShard.offer
    _measured = NocShard._measured
    take_ejected = NocShard.take_ejected

    def _take(self, arrays, pos: int, u: int):
        cyc = arrays[0]
        j = pos + int(np.searchsorted(cyc[pos:], u, side="left"))
        return tuple(a[pos:j] for a in arrays), j

    def _inject(self, t: int, u: int) -> None:
        """Packets created in [t, u) reserve their source's injection link and bid at their router."""
        parts = []
        if self.p.packet_rate > 0:
            while True:
                self._next_creation(t)
                if self._cre_pos >= len(self._cre[0]) or self._cre[0][self._cre_pos] >= u:
                    break
                (c, s, d), self._cre_pos = self._take(self._cre, self._cre_pos, u)
                parts.append((c, s, d, np.full(len(c), self.p.packet_flits, dtype=np.int64)))
        if self._script_pos < len(self._script[0]) and self._script[0][self._script_pos] < u:
            part, self._script_pos = self._take(self._script, self._script_pos, u)
            parts.append(part)
        if not parts:
            return
        cyc, ls, dst, fl = (np.concatenate([x[i] for x in parts]) for i in range(4)) if len(parts) > 1 else parts[0]
        if len(cyc) and cyc.min() < t:
            raise RuntimeError(f"packets created at cycle {cyc.min()} were skipped")
        if len(cyc) > 1:
            order = np.lexsort((cyc, ls))
            cyc, ls, dst, fl = cyc[order], ls[order], dst[order], fl[order]
        start = reserve(ls, cyc, fl, self.inj_free[ls])
        last = last_of_group(ls)
        self.inj_free[ls[last]] = start[last] + fl[last]
        g = self.routers[ls]
        pkt = cyc * self.N + g
        if self.measure:
            self._ensure(int(cyc.max()) + 1)
            np.add.at(self.created_flits, cyc, fl)
            win = (cyc >= self.w0) & (cyc < self.w1)
            if win.any():
                self.measured_created += int(np.count_nonzero(win))
                np.add.at(self.window_created_by_src, g[win], fl[win])
                if (cyc < self.horizon).any():
                    self._inj_rec.append((pkt[win], dst[win], start[win]))
        self._add(np.stack((start + self.first_bid, ls, g * self.P + topo.LOCAL, pkt, dst, fl)))

    def _ensure(self, n: int) -> None:
        if n >= len(self.created_flits):
            size = max(n + 1, 2 * len(self.created_flits))
            for name in ("created_flits", "ejected_diff"):
                a = getattr(self, name)
                g = np.zeros(size, dtype=np.int64)
                g[: len(a)] = a
                setattr(self, name, g)

    def counters(self) -> tuple[int, int]:
        return self.measured_created, self.measured_ejected

    def link_totals(self) -> LinkCounts:
        """Flits over every router-to-router link of the shard, over the whole run."""
        used = np.flatnonzero((self.nbr >= 0) & (np.arange(len(self.nbr)) % self.P != topo.LOCAL))
        total = self.link_flits_total + np.array(self._link_total, dtype=np.int64)
        return LinkCounts(self.routers[used // self.P], used % self.P, total[used])

    @classmethod
    def split(cls, out: PacketBoundary, owner: np.ndarray, params: NocParams, shards: int) -> list[PacketBoundary]:
        return split_packets(out, owner, shards)

    # ------------------------------------------------------------------ results
    def report(self) -> NocReport:
        lc = self.link_totals()
        router, port = lc.router, lc.port
        used = self.local_of[router] * self.P + port
        return NocReport(
            **self._measured(),
            ejected_flits=np.cumsum(self.ejected_diff),
            link_router=router,
            link_port=port,
            link_flits=self.link_flits[used],
            flits_buffered=0,
            flits_queued=0,  # an injected packet holds its link reservations at once
            flits_in_flight=self.pending_flits,
        )
