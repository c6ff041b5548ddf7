"""The packet-level NoC's reservations, compiled: one event at a time in (cycle, port) order.

A pending bid is a head that wants its next output link; bids wait in a binary heap keyed
by (bid cycle, global input-port id), which is unique (a port takes one head per cycle)
and the same whatever the shard cut. Serving bids in that order serves every link first
come first served with ties in static port order, exactly as PacketShard's model states;
packets created at a cycle are injected before any bid of that cycle (their own first
bids come later). ``run`` returns to Python when it is done or needs the next chunk of
synthetic packets or room in a buffer (checked before an event, never half way through).

The state is one record, ``Tables`` (int64 columns named below): ``port[j]`` output link
``j`` (first free cycle, where it leads), ``node[r]`` router ``r``'s injection link and
pending bids, the heap ``hkey``/``hval``; the measurement arrays are sim/noc/measure.py's.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sim.cycles import NEVER
from sim.noc import measure as ms
from sim.noc.cut import cap_of, offered, walk
from sim.noc.jit import inline, kernel
from sim.noc.measure import MeasureTables
from sim.noc.ports import LOCAL
from sim.noc.sources import CRE_POS, SCR_POS, SourceTables

# prm: static parameters
(N, NL, P, HOP, FIRST_BID, FLIT_DELAY, PORT_BITS, PACKET_FLITS, SYNTHETIC, RECORD, MEASURE,
 W0, W1, HORIZON, PKT_LO, PKT_HI, PRM_SIZE) = range(17)
# sc: shard scalars (TAIL_MIN: the earliest tail recorded since the caller reset it)
PENDING_FLITS, HEAP_N, OUT_N, NEED, TAIL_MIN, SC_SIZE = range(6)
# port columns: first free cycle of the output link, local router across (-1: none or
# another shard's), global input port a head arrives on there
LINK_FREE, NBR_LOCAL, NEXT_PORT, PORT_COLS = range(4)
# node columns: first free cycle of the injection link, global router id, bids waiting
INJ_FREE, ROUTER, PENDING, NODE_COLS = range(4)
# hval columns
PKT, ROUTER_AT, DST, FLITS = range(4)
# why run returned
DONE, NEED_CHUNK, NEED_CYCLES, NEED_ROOM, SKIPPED = range(5)



class Tables(NamedTuple):
    """The links' and bids' state as the kernels take it (PacketShard builds it; its packets'
    and its measurement's are ``SourceTables`` and ``MeasureTables``), passed as a plain
    tuple for the reason sim/noc/kernel.py's ``Tables`` gives."""

    prm: np.ndarray  # static parameters (PRM columns)
    sc: np.ndarray  # shard scalars (SC columns)
    port: np.ndarray  # [output links, PORT_COLS]
    node: np.ndarray  # [routers, NODE_COLS]
    route: np.ndarray  # [routers * nodes] int8: output port at a router towards a destination
    hkey: np.ndarray  # [heap] bids: (cycle << PORT_BITS) | global input port
    hval: np.ndarray  # [heap, 4] packet, local router, destination, flits
    local_of: np.ndarray  # [nodes] local router of a global one (-1: another shard's)
    out: np.ndarray  # [rows, 5] heads bidding in another shard: cycle, global input port, packet, destination, flits


@inline
def heap_move(hkey, hval, to, frm):
    """Heap entry ``frm`` (key and values) to slot ``to``."""
    hkey[to] = hkey[frm]
    for c in range(4):
        hval[to, c] = hval[frm, c]


@inline
def heap_push(st, cycle, port, pkt, lr, dst, fl):
    """Queue a bid of router ``lr`` (local) at ``cycle`` on global input port ``port``."""
    hkey, hval, sc = st.hkey, st.hval, st.sc
    key = (cycle << st.prm[PORT_BITS]) | port
    i = sc[HEAP_N]
    while i > 0 and hkey[(i - 1) >> 1] > key:  # sift up
        heap_move(hkey, hval, i, (i - 1) >> 1)
        i = (i - 1) >> 1
    hkey[i] = key
    hval[i, PKT] = pkt
    hval[i, ROUTER_AT] = lr
    hval[i, DST] = dst
    hval[i, FLITS] = fl
    sc[HEAP_N] += 1
    sc[PENDING_FLITS] += fl
    st.node[lr, PENDING] += 1


@inline
def heap_pop(st):
    """Remove the earliest bid (the caller has read it): the last entry sifts down from
    the root (it is parked in slot n, past the end, meanwhile)."""
    hkey, hval, sc = st.hkey, st.hval, st.sc
    n = sc[HEAP_N] - 1
    sc[HEAP_N] = n
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and hkey[c + 1] < hkey[c]:
            c += 1
        if hkey[c] >= hkey[n]:
            break
        heap_move(hkey, hval, i, c)
        i = c
    heap_move(hkey, hval, i, n)


@kernel
def accept(tables, rows):
    """Queue inbound heads: rows (cycle, global input port, packet, destination, flits)."""
    st = Tables(*tables)
    for k in range(rows.shape[1]):
        lr = st.local_of[rows[1, k] // st.prm[P]]
        heap_push(st, rows[0, k], rows[1, k], rows[2, k], lr, rows[3, k], rows[4, k])


@inline
def inject(st, m, cycle, r, dst, fl):
    """A packet created at ``cycle`` reserves its source's injection link and bids at its router."""
    prm, node = st.prm, st.node
    s = max(cycle, node[r, INJ_FREE])
    node[r, INJ_FREE] = s + fl
    g = node[r, ROUTER]
    pkt = cycle * prm[N] + g
    if prm[MEASURE]:
        m.cycles[ms.CREATED_ROW, cycle] += fl
        if prm[W0] <= cycle < prm[W1]:
            m.sc[ms.CREATED] += 1
            m.by_src[ms.CREATED_ROW, g] += fl
            ms.append(m.sc, m.rec, ms.INJ, pkt, dst, s)
    heap_push(st, s + prm[FIRST_BID], g * prm[P] + LOCAL, pkt, r, dst, fl)


@inline
def eject(st, m, pkt, head, fl):
    """A packet's head reaches its terminal at ``head``; its flits follow one a cycle."""
    prm, m_sc, m_rec, m_cycles = st.prm, m.sc, m.rec, m.cycles
    tail = head + fl - 1
    if prm[RECORD]:
        ms.append(m_sc, m_rec, ms.DLV, pkt, tail, 0)
        if tail < st.sc[TAIL_MIN]:
            st.sc[TAIL_MIN] = tail
    if not prm[MEASURE]:
        return
    m_cycles[ms.EJECTED_ROW, head] += 1  # differences: one flit a cycle from head to tail
    m_cycles[ms.EJECTED_ROW, tail + 1] -= 1
    inside = min(tail + 1, prm[W1]) - max(head, prm[W0])
    if inside > 0:
        m.by_src[ms.EJECTED_ROW, pkt % prm[N]] += inside
    if prm[PKT_LO] <= pkt < prm[PKT_HI] and tail < prm[HORIZON]:
        # every flit i of the packet arrives at head + i: sum of (arrival - creation)
        m_sc[ms.LAT_SUM] += fl * (head - pkt // prm[N]) + fl * (fl - 1) // 2
        m_sc[ms.LAT_COUNT] += fl
        m_sc[ms.EJECTED] += 1
        ms.append(m_sc, m_rec, ms.EJ, pkt, tail, 0)


@inline
def grant(st, m):
    """Serve the earliest bid: its output link is granted from max(bid, link free) for as
    many cycles as it has flits; the head bids at the next router a hop later."""
    prm, sc, port, hkey, hval, m_links = st.prm, st.sc, st.port, st.hkey, st.hval, m.links
    cycle = hkey[0] >> prm[PORT_BITS]
    pkt, lr, dst, fl = hval[0, PKT], hval[0, ROUTER_AT], hval[0, DST], hval[0, FLITS]
    op = lr * prm[P] + st.route[lr * prm[N] + dst]
    s = max(cycle, port[op, LINK_FREE])
    if prm[MEASURE] and op % prm[P] == LOCAL and s + prm[FLIT_DELAY] + fl + 1 >= m.cycles.shape[1]:
        sc[NEED] = s + prm[FLIT_DELAY] + fl + 1
        return False
    heap_pop(st)
    sc[PENDING_FLITS] -= fl
    st.node[lr, PENDING] -= 1
    port[op, LINK_FREE] = s + fl
    m_links[ms.TOTAL_ROW, op] += fl
    if prm[MEASURE]:
        inside = min(s + fl, prm[W1]) - max(s, prm[W0])
        if inside > 0:
            m_links[ms.WINDOW_ROW, op] += inside
    if op % prm[P] == LOCAL:
        eject(st, m, pkt, s + prm[FLIT_DELAY], fl)
        return True
    if prm[MEASURE] and prm[PKT_LO] <= pkt < prm[PKT_HI]:
        m.sc[ms.HOPS] += 1
    nxt = port[op, NBR_LOCAL]
    if nxt >= 0:
        heap_push(st, s + prm[HOP], port[op, NEXT_PORT], pkt, nxt, dst, fl)
    else:
        out = st.out
        n = sc[OUT_N]
        out[n, 0] = s + prm[HOP]
        out[n, 1] = port[op, NEXT_PORT]
        out[n, 2] = pkt
        out[n, 3] = dst
        out[n, 4] = fl
        sc[OUT_N] = n + 1
    return True


@kernel
def run(t, t1, more, tables, source, meter, relay):
    """Serve every creation and bid before ``t1`` (none may lie before ``t``); returns (why
    it stopped; when done, the next event's cycle (NEVER: none) and the rows in ``out``).
    ``more``: a next synthetic chunk is due before the horizon; ``tables``, ``source``,
    ``meter``: the ``Tables``, ``SourceTables`` and ``MeasureTables`` of the shard, as plain
    tuples. ``relay >= 0`` (recording ejections): stop before ``sc[TAIL_MIN] + relay`` too,
    the first cycle a terminal that received a packet could answer it."""
    st, src, m = Tables(*tables), SourceTables(*source), MeasureTables(*meter)
    prm, sc, hkey, cre, scr, cursor, m_sc = st.prm, st.sc, st.hkey, src.cre, src.scr, src.cursor, m.sc
    while True:
        if relay >= 0 and sc[TAIL_MIN] < t1 - relay:
            t1 = sc[TAIL_MIN] + relay
        pos = cursor[CRE_POS]
        cre_next = NEVER
        if prm[SYNTHETIC]:
            if pos < cre.shape[1]:
                cre_next = cre[0, pos]
            elif more:
                return NEED_CHUNK, 0, 0
        spos = cursor[SCR_POS]
        scr_next = scr[0, spos] if spos < scr.shape[1] else NEVER
        bid_next = hkey[0] >> prm[PORT_BITS] if sc[HEAP_N] else NEVER
        nxt = min(cre_next, scr_next, bid_next)
        if nxt >= t1:
            return DONE, nxt, sc[OUT_N]
        if nxt < t:
            return SKIPPED, 0, 0
        if (st.out.shape[0] - sc[OUT_N] < 1 or hkey.shape[0] - sc[HEAP_N] < 1
                or m.rec.shape[1] - max(m_sc[ms.N_INJ], m_sc[ms.N_EJ], m_sc[ms.N_DLV]) < 1):
            return NEED_ROOM, 0, 0
        if cre_next == nxt:  # synthetic packets first, then scripted ones, then bids
            if prm[MEASURE] and nxt >= m.cycles.shape[1]:
                sc[NEED] = nxt
                return NEED_CYCLES, 0, 0
            inject(st, m, nxt, cre[1, pos], cre[2, pos], prm[PACKET_FLITS])
            cursor[CRE_POS] = pos + 1
        elif scr_next == nxt:
            if prm[MEASURE] and nxt >= m.cycles.shape[1]:
                sc[NEED] = nxt
                return NEED_CYCLES, 0, 0
            inject(st, m, nxt, scr[1, spos], scr[2, spos], scr[3, spos])
            cursor[SCR_POS] = spos + 1
        elif not grant(st, m):
            return NEED_CYCLES, 0, 0


@kernel
def earliest_output(tables, source, chunk_end, more, cut, out):
    """``out[j]``: the earliest cycle a head now pending or offered here could bid in shard
    ``j`` (sim/noc/cut.py), each hop at its least delay (``HOP``). ``cut``: (route,
    nxt_local, exit_to, in_from, reach, reach_min, adjacent, relay); ``tables``, ``source``:
    as ``run`` takes them."""
    st, src = Tables(*tables), SourceTables(*source)
    prm, hkey, hval = st.prm, st.hkey, st.hval
    adjacent = cut[6]
    n, p_, hop, fd = prm[N], prm[P], prm[HOP], prm[FLIT_DELAY]
    for j in range(out.shape[0]):
        out[j] = NEVER
    for i in range(st.sc[HEAP_N]):  # pending bids
        c = hkey[i] >> prm[PORT_BITS]
        if c + hop < cap_of(out, adjacent):
            walk(cut, out, n, p_, hval[i, ROUTER_AT], hval[i, DST], c, hop, fd)
    offered(cut, out, n, p_, src.scr, src.cre, src.cursor, prm[SYNTHETIC], more, chunk_end, prm[FIRST_BID], hop, fd)
