"""The cycle-level router pipeline, compiled: credits, arrivals, VC allocation, switch
allocation, traversal and injection of every router of a shard, cycle after cycle.

``run`` simulates cycles [t, t1) of one shard in machine code (sim/noc/jit.py) and
returns to Python only when it is done or needs something Python provides: the next
chunk of synthetic packets, or room in a growable buffer (it checks before a cycle, so a
cycle is never left half done). The model is NocShard's (sim/noc/shard.py documents the
router and the index conventions); this file holds only its arithmetic.

A cycle: the credits due, then router by router: the flits due at its input ports are
written into their VCs (``receive``), then BookSim2's IQRouter phases: every waiting VC
bids (``bid_vc``, ``bid_switch``: the allocators' input stages), the output VCs are granted
(``grant_vcs``), the output ports (``grant_switch``), and the switch winners leave
(``leave``: to the next router's input port a few cycles on, or to the terminal); then new
packets and the sources. Within a cycle a router reads and writes only its own state (what
it sends is due in a later cycle), so visiting routers one after the other gives IQRouter's
winners; and every arbiter's keys are distinct within its group (a requester's round-robin
position), so the order requests are visited in never matters either. Hops of measured
packets are added once the cycle's ejections are known.

The state is a record of arrays per owner: the routers' ``Tables`` (columns named below),
the packets' ``SourceTables`` (sim/noc/sources.py) and the measurement's ``MeasureTables``
(sim/noc/measure.py). In ``Tables``: ``vc[i]`` (int32) input VC ``i`` and output VC ``i``
of the same (router, port, vc), ``ready[i]`` (int64) from which cycle on it may bid;
``port[j]`` (int32) input and output port ``j``: which of its input VCs wait for a VC and
which for the switch (a bit per VC, so a router finds its bidders without looking at its
idle VCs), its allocators' pointers and its static wiring (what it feeds, where its credits
go); ``node[r]`` (int64) router ``r``: its terminal's source queue and which of its input
ports have VCs waiting for an allocator (a bit each); ``route`` (int8) the output port
towards each destination; the event wheel (int64) holds what is due in the next ``W``
cycles (every delay is shorter than ``W``): ``wheel_f[s, j]`` the flit due at input port
``j`` (a port takes at most one a cycle), ``wheel_r[s, r]`` which of router ``r``'s input
ports have one (a bit each), ``wheel_c[s]`` credits. Router ``r``'s rows are contiguous in
every table and a cycle visits the routers in order, so most of what a cycle touches
streams through the cache; what it touches at random (per hop, a route-table row and a
buffer slot) a large shard asks for a few routers ahead (``ahead``: at 32x32 these misses
took half the time). The hot paths divide by nothing (a 64-bit division costs tens of
cycles): indices come from the loops and the static columns, and every modulo is of a sum
below twice the modulus.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.np.unsafe.ndarray import to_fixed_tuple

from sim.cycles import NEVER
from sim.noc import measure as ms
from sim.noc.cut import cap_of, lower, offered, walk
from sim.noc.jit import inline, kernel, prefetch
from sim.noc.measure import MeasureTables
from sim.noc.ports import EAST, LOCAL, SOUTH, WEST
from sim.noc.sources import CRE_POS, SCR_POS, SourceTables

HEAD, TAIL = 1, 2
EJECT, LOCAL_LINK, REMOTE_LINK, NO_LINK = 0, 1, 2, 3  # output-port kinds (port[:, KIND])

# prm: static parameters
(N, NL, P, V, B, PV, NI, COLS, TORUS, ROUTING_DELAY, VC_ALLOC_DELAY, FLIT_DELAY, CREDIT_RETURN,
 INJECT_DELAY, INJECT_CREDIT_RETURN, EJECT_CREDIT_RETURN, PACKET_FLITS, SYNTHETIC, RECORD, W0, W1,
 HORIZON, PKT_LO, PKT_HI, CLASS0_BITS, CLASS1_BITS, AHEAD, PRM_SIZE) = range(28)
# sc: shard scalars
(BUFFERED, QUEUED, QUEUED_FLITS, HOPS_SEEN, OUT_F, OUT_C, IN_FLIGHT, WHEEL_NEXT, SC_SIZE) = range(9)
# vc columns (state): input-VC side, then output-VC side
Q_HEAD, Q_COUNT, OUT_OP, OUT_VC, VA_IN_NPTR, VA_OUT_NPTR, VC_COLS = range(7)
# port columns: allocation state, then static: kind, router across (global, -1 none),
# port number, the port's first VC index within the router (o * vcs); for an input port the
# first of the credit counters its VCs' credits go to (an upstream output VC, global across
# a cut; the source's for the terminal's port); for an output port the first input VC it
# feeds (global across a cut), that input port and its router (local)
(FREE_VCS, SA_IN_NPTR, SA_VC_NOFF, SA_OUT_NPTR, VA_WAIT, SA_WAIT, KIND, NBR, PNUM, PV_OFF, UP_BASE,
 DOWN_BASE, DOWN_PORT, DOWN_ROUTER, PORT_COLS) = range(15)
# node columns
(SQ_HEAD, SQ_COUNT, SRC_FLIT, SRC_VC, INJ_LAST, INJ_IN_USE, ROUTER, WAITING, NODE_COLS) = range(9)
# work rows: arbiter scratch, indexed within one router
KEY_A, WHO_A, LIST_A, KEY_B, WHO_B, LIST_B, IN_PORT, WORK_ROWS = range(8)
# wheel_f columns: VC + 1 (0: no flit), packet, destination, flags
F_VC1, F_PKT, F_DST, F_FLAG = range(4)
# buf / sq columns
PKT, DST, FLAG = 0, 1, 2
LENGTH = 2
# why run returned
DONE, NEED_CHUNK, NEED_CYCLES, NEED_ROOM, NEED_QUEUE, SKIPPED = range(6)


class Tables(NamedTuple):
    """The routers' state as the kernels take it (NocShard builds it); its packets' and its
    measurement's are ``SourceTables`` and ``MeasureTables``.

    A kernel takes each record as a plain tuple, ``tuple(record)``, and names its fields again
    (``Tables(*tables)``): numba's dispatcher types a plain tuple of arrays in C and a named
    one in Python (about 2 us a call, a quarter of a short epoch's advance). Each owner keeps
    its plain tuple (``kernel_tables``) and builds it anew when it replaces an array by a
    larger one, which is rare; building one costs as much as a short epoch's kernel call."""

    prm: np.ndarray  # static parameters (PRM columns)
    sc: np.ndarray  # shard scalars (SC columns)
    vc: np.ndarray  # [input VCs, VC_COLS] int32
    ready: np.ndarray  # [input VCs] from which cycle it may bid
    credit: np.ndarray  # [output VCs, then the sources' VCs] free buffer slots downstream
    port: np.ndarray  # [ports, PORT_COLS] int32
    buf: np.ndarray  # [input VCs * buffers, 3] flits: packet, destination, flags
    route: np.ndarray  # [routers * nodes] int8: output port at a router towards a destination
    first_free: np.ndarray  # [masks * vcs] the first free VC from a start (shard.first_free_table)
    node: np.ndarray  # [routers, NODE_COLS]
    sq: np.ndarray  # [routers, queue, 3] source queues: packet, destination, flits
    work: np.ndarray  # [WORK_ROWS, ...] arbiter scratch
    wheel_f: np.ndarray  # [W, ports, 4] flits due
    wheel_c: np.ndarray  # [W, counters] credits due
    wheel_n: np.ndarray  # [2, W] flits, credits due in each slot
    wheel_r: np.ndarray  # [W, routers] the input ports with a flit due (a bit per port)
    local_of: np.ndarray  # [nodes] local router of a global one (-1: another shard's)
    out_f: np.ndarray  # [rows, 5] flits leaving the shard: due, global input VC, packet, destination, flags
    out_c: np.ndarray  # [rows, 2] credits leaving the shard: due, global output VC


@inline
def wrap(x, m):
    """``x mod m`` for 0 <= x < 2 m."""
    return x - m if x >= m else x


@inline
def push_flit(st, due, r, j, v, pkt, dst, flag):
    """A flit due at VC ``v`` of input port ``j`` (of router ``r``, local ids) at ``due``."""
    prm, wheel_f, wheel_r = st.prm, st.wheel_f, st.wheel_r
    s = due & (wheel_f.shape[0] - 1)
    bit = np.int64(1) << (j - r * prm[P])
    # checked on the small per-router mask: the flit's own row is written, never read, here
    # (it is rarely in cache: it is read a few cycles on)
    if wheel_r[s, r] & bit:
        raise RuntimeError("two flits due at one input port in one cycle")
    wheel_r[s, r] |= bit
    wheel_f[s, j, F_VC1] = v + 1
    wheel_f[s, j, F_PKT] = pkt
    wheel_f[s, j, F_DST] = dst
    wheel_f[s, j, F_FLAG] = flag
    st.wheel_n[0, s] += 1
    st.sc[IN_FLIGHT] += 1


@inline
def push_credit(st, due, counter):
    wheel_c, wheel_n = st.wheel_c, st.wheel_n
    s = due & (wheel_c.shape[0] - 1)
    k = wheel_n[1, s]
    if k >= wheel_c.shape[1]:
        raise RuntimeError("more credits due in one cycle than credit counters")
    wheel_c[s, k] = counter
    wheel_n[1, s] = k + 1


@inline
def wheel_next(wheel_n, t):
    """Earliest cycle >= t with a flit or credit due (NEVER when the wheel is empty)."""
    w = wheel_n.shape[1]
    for k in range(w):
        s = (t + k) & (w - 1)
        if wheel_n[0, s] or wheel_n[1, s]:
            return t + k
    return NEVER


@kernel
def accept(tables, t0, flits, credits):
    """Queue inbound boundary traffic: flits (due, global input VC, packet, destination,
    flags) and credits (due, global output VC), all due in [t0, t0 + W)."""
    st = Tables(*tables)
    prm, local_of = st.prm, st.local_of
    pv = prm[PV]
    w = st.wheel_f.shape[0]
    for k in range(flits.shape[1]):
        due = flits[0, k]
        if due < t0 or due >= t0 + w:
            raise RuntimeError("inbound flit due outside the event wheel")
        g = flits[1, k] // pv
        r = local_of[g]
        rest = flits[1, k] - g * pv  # port * vcs + vc
        push_flit(st, due, r, r * prm[P] + rest // prm[V], rest % prm[V], flits[2, k], flits[3, k], flits[4, k])
    for k in range(credits.shape[1]):
        due = credits[0, k]
        if due < t0 or due >= t0 + w:
            raise RuntimeError("inbound credit due outside the event wheel")
        g = credits[1, k] // pv
        push_credit(st, due, local_of[g] * pv + credits[1, k] - g * pv)
    st.sc[WHEEL_NEXT] = wheel_next(st.wheel_n, t0)


@inline
def wait_for_vc(st, i, r, ip, bit, dst, when):
    """A head at the front of input VC ``i`` of router ``r`` (bit ``bit`` of input port
    ``ip``): route it (one lookup) and bid for a VC."""
    prm = st.prm
    st.vc[i, OUT_OP] = r * prm[P] + st.route[r * prm[N] + dst]
    st.ready[i] = when
    st.port[ip, VA_WAIT] |= bit


@inline
def receive(st, s, t, r, p, j):
    """The flit due at input port ``j`` (port ``p`` of router ``r``) enters its VC; a flit
    reaching the front of its VC starts work."""
    prm, vc, buf, wheel_f = st.prm, st.vc, st.buf, st.wheel_f
    v1 = wheel_f[s, j, F_VC1]
    wheel_f[s, j, F_VC1] = 0
    pkt, dst, flag = wheel_f[s, j, F_PKT], wheel_f[s, j, F_DST], wheel_f[s, j, F_FLAG]
    i = j * prm[V] + v1 - 1
    cnt = vc[i, Q_COUNT]
    slot = i * prm[B] + wrap(vc[i, Q_HEAD] + cnt, prm[B])
    buf[slot, PKT] = pkt
    buf[slot, DST] = dst
    buf[slot, FLAG] = flag
    vc[i, Q_COUNT] = cnt + 1
    st.sc[BUFFERED] += 1
    if cnt == 0:
        st.node[r, WAITING] |= np.int64(1) << p
        bit = np.int32(1) << (v1 - 1)
        if flag & HEAD:
            wait_for_vc(st, i, r, j, bit, dst, t + prm[ROUTING_DELAY])
        else:  # a body flit reaching an empty active VC may bid for the switch at once
            st.ready[i] = t
            st.port[j, SA_WAIT] |= bit


@inline
def claim(work, key_row, who_row, list_row, n_listed, group, key, who):
    """Round-robin arbitration: the smallest key of a group wins. Returns the new length
    of the list of groups that have a request."""
    old = work[key_row, group]
    if old == NEVER:
        work[list_row, n_listed] = group
        n_listed += 1
    if key < old:
        work[key_row, group] = key
        work[who_row, group] = who
    return n_listed


@inline
def dateline_bits(st, i, op):
    """VCs a head may take on a torus: the half of its dateline class (all at the terminal)."""
    prm, port = st.prm, st.port
    o = port[op, PNUM]
    if o == LOCAL:
        return (np.int64(1) << prm[V]) - 1
    cols = prm[COLS]
    src = st.buf[i * prm[B] + st.vc[i, Q_HEAD], PKT] % prm[N]
    nxt = port[op, NBR]
    if o == EAST:  # moving +col, it has wrapped iff it is now left of its source column
        wrapped = nxt % cols < src % cols
    elif o == WEST:
        wrapped = nxt % cols > src % cols
    elif o == SOUTH:
        wrapped = nxt // cols < src // cols
    else:
        wrapped = nxt // cols > src // cols
    return prm[CLASS1_BITS] if wrapped else prm[CLASS0_BITS]


@inline
def allocate(st, m, t, r):
    """Router ``r``'s separable input-first VC and switch allocators, one iteration each,
    round-robin arbiters (IQRouter's phases): every waiting VC bids, output VCs are granted,
    then output ports; the switch winners leave their buffers, traverse the switch and
    their link (or reach their terminal)."""
    nt, na = bid(st, t, r)
    grant_vcs(st, t, r, nt)
    if na == 0:
        return
    nb = grant_switch(st, r, na)
    for k in range(nb):
        leave(st, m, t, r, k)


@inline
def bid(st, t, r):
    """The allocators' input stages: each input VC of router ``r`` that waits and is ready
    bids for an output VC or for the switch. Returns how many output VCs and how many input
    ports have a bid (listed in ``work``)."""
    prm, port, work = st.prm, st.port, st.work
    p_, v_ = prm[P], prm[V]
    base = r * prm[PV]
    nt = 0  # VC allocation requests, by output VC (local index)
    na = 0  # switch requests, by input port (local index)
    ports = st.node[r, WAITING]
    while ports:  # each input port with waiting VCs, then those VCs, in order, from bit masks
        p = trailing_zeros(ports)
        ports &= ports - 1
        ip = r * p_ + p
        va = port[ip, VA_WAIT]
        both = va | port[ip, SA_WAIT]
        while both:
            v = trailing_zeros(both)
            both &= both - 1
            inl = p * v_ + v  # the VC's index within the router
            work[IN_PORT, inl] = p
            if (va >> v) & 1:
                nt = bid_vc(st, t, base, inl, nt)
            else:
                na = bid_switch(st, t, ip, p, base + inl, v, na)
    return nt, na


@inline
def bid_vc(st, t, base, inl, nt):
    """VC allocation, input stage: the head of input VC ``base + inl`` picks the first free
    output VC of its output port in round-robin order over (port, vc) from its pointer
    (inside one port: cyclic from the pointer if it points into the port, else from VC 0)
    and asks that VC's arbiter, keyed by its position from the VC's own pointer."""
    i = base + inl
    if st.ready[i] > t:
        return nt
    prm, vc, port = st.prm, st.vc, st.port
    v_, pv = prm[V], prm[PV]
    op = vc[i, OUT_OP]
    bits = port[op, FREE_VCS]
    if prm[TORUS]:
        bits &= dateline_bits(st, i, op)
    rel = (pv - vc[i, VA_IN_NPTR]) - port[op, PV_OFF]
    start = rel if 0 <= rel < v_ else 0
    pick = st.first_free[bits * v_ + start]
    if pick < 0:
        return nt
    target = op * v_ + pick
    return claim(st.work, KEY_A, WHO_A, LIST_A, nt, target - base, wrap(inl + vc[target, VA_OUT_NPTR], pv), i)


@inline
def bid_switch(st, t, ip, p, i, v, na):
    """Switch allocation, input stage: input VC ``i`` (VC ``v`` of input port ``ip``, the
    router's port ``p``), with a flit ready and a credit for its output VC, asks its input
    port's arbiter: one VC per input port, round robin over output ports, then over VCs."""
    vc, port = st.vc, st.port
    if st.ready[i] > t or st.credit[vc[i, OUT_VC]] <= 0:
        return na
    p_, v_ = st.prm[P], st.prm[V]
    key = (wrap(port[vc[i, OUT_OP], PNUM] + port[ip, SA_IN_NPTR], p_) * v_
           + wrap(v + port[ip, SA_VC_NOFF], v_))
    return claim(st.work, KEY_B, WHO_B, LIST_B, na, p, key, i)


@inline
def grant_vcs(st, t, r, nt):
    """VC allocation, output stage: each output VC asked for goes to its arbiter's winner,
    which may bid for the switch ``vc_alloc_delay`` cycles on; both pointers move past it."""
    prm, vc, port, work = st.prm, st.vc, st.port, st.work
    v_, pv = prm[V], prm[PV]
    base = r * pv
    for k in range(nt):
        tl = work[LIST_A, k]
        i = work[WHO_A, tl]
        work[KEY_A, tl] = NEVER
        target = base + tl
        op = vc[i, OUT_OP]
        pick = target - op * v_
        port[op, FREE_VCS] -= np.int64(1) << pick
        vc[i, OUT_VC] = target
        st.ready[i] = t + prm[VC_ALLOC_DELAY]  # >= t + 1: not a switch request this cycle
        vc[i, VA_IN_NPTR] = pv - wrap(port[op, PV_OFF] + pick + 1, pv)
        vc[target, VA_OUT_NPTR] = pv - wrap(i - base + 1, pv)
        ip = r * prm[P] + work[IN_PORT, i - base]  # noted when it bid
        bit = np.int32(1) << (i - ip * v_)
        port[ip, VA_WAIT] ^= bit
        port[ip, SA_WAIT] |= bit


@inline
def grant_switch(st, r, na):
    """Switch allocation, output stage: each input port's winner asks its output port's
    arbiter (one input port per output port). Returns how many output ports were granted
    (listed in ``work``, the winner of each its input port noted)."""
    work = st.work
    p_ = st.prm[P]
    pbase = r * p_
    nb = 0
    for k in range(na):
        p = work[LIST_B, k]
        i = work[WHO_B, p]
        work[KEY_B, p] = NEVER
        op = st.vc[i, OUT_OP]
        nb = claim(work, KEY_A, WHO_A, LIST_A, nb, op - pbase, wrap(p + st.port[op, SA_OUT_NPTR], p_), i)
    return nb


@inline
def leave(st, m, t, r, k):
    """The ``k``-th output port granted this cycle: the switch pointers move past the
    winner, whose flit leaves its buffer, returns its credit upstream and crosses the switch
    and the link (or reaches the terminal)."""
    prm, port, work = st.prm, st.port, st.work
    p_, v_ = prm[P], prm[V]
    base, pbase = r * prm[PV], r * p_
    opl = work[LIST_A, k]
    i = work[WHO_A, opl]
    work[KEY_A, opl] = NEVER
    op = pbase + opl
    p = work[IN_PORT, i - base]
    ip = pbase + p
    v = i - base - p * v_
    ov = st.vc[i, OUT_VC]
    w = ov - op * v_  # the output VC's number
    port[ip, SA_IN_NPTR] = p_ - wrap(opl + 1, p_)
    port[ip, SA_VC_NOFF] = v_ - wrap(v + 1, v_)
    port[op, SA_OUT_NPTR] = p_ - wrap(p + 1, p_)
    slot = dequeue(st, t, r, i, ip, v, op, ov, w)
    credit_upstream(st, t, ip, p, v)
    if opl == LOCAL:
        eject(st, m, t, ov, st.buf[slot, PKT], st.buf[slot, FLAG])
    else:
        traverse(st, m, t, op, w, slot)


@inline
def dequeue(st, t, r, i, ip, v, op, ov, w):
    """The flit at the front of input VC ``i`` (VC ``v`` of input port ``ip``) leaves for
    output VC ``ov`` (VC ``w`` of output port ``op``) and uses one of its credits. After a
    tail the output VC is free again and the next packet's head, if one waits behind it,
    bids for a VC; after a body flit the packet's next flit may go next cycle. Returns the flit's buffer slot."""
    prm, vc = st.prm, st.vc
    b = prm[B]
    head = vc[i, Q_HEAD]
    slot = i * b + head
    vc[i, Q_HEAD] = wrap(head + 1, b)
    cnt = vc[i, Q_COUNT] - 1
    vc[i, Q_COUNT] = cnt
    st.sc[BUFFERED] -= 1
    st.credit[ov] -= 1
    bit = np.int32(1) << v
    if st.buf[slot, FLAG] >= TAIL:
        st.port[op, FREE_VCS] += np.int64(1) << w
        st.port[ip, SA_WAIT] ^= bit
        if cnt > 0:
            wait_for_vc(st, i, r, ip, bit, st.buf[i * b + vc[i, Q_HEAD], DST], t + 1 + prm[ROUTING_DELAY])
        else:
            port_idle(st, r, ip)
    else:
        st.ready[i] = t + 1
        if cnt == 0:
            st.port[ip, SA_WAIT] ^= bit
            port_idle(st, r, ip)
    return slot


@inline
def port_idle(st, r, ip):
    """A VC of input port ``ip`` of router ``r`` stopped waiting: the router notes when
    none of the port's VCs waits any more."""
    if st.port[ip, SA_WAIT] == 0 and st.port[ip, VA_WAIT] == 0:
        st.node[r, WAITING] ^= np.int64(1) << (ip - r * st.prm[P])


@inline
def credit_upstream(st, t, ip, p, v):
    """A flit left VC ``v`` of input port ``ip`` (the router's port ``p``): its slot's credit
    goes to the output VC upstream (across the cut, or the source's at the terminal port)."""
    prm, port, sc = st.prm, st.port, st.sc
    tgt = port[ip, UP_BASE] + v
    if port[ip, KIND] == REMOTE_LINK:
        n = sc[OUT_C]
        st.out_c[n, 0] = t + prm[CREDIT_RETURN]
        st.out_c[n, 1] = tgt
        sc[OUT_C] = n + 1
    elif p == LOCAL:
        push_credit(st, t + prm[INJECT_CREDIT_RETURN], tgt)
    else:
        push_credit(st, t + prm[CREDIT_RETURN], tgt)


@inline
def traverse(st, m, t, op, w, slot):
    """The flit in buffer ``slot`` crosses the switch and the link of output port ``op`` into
    VC ``w`` of the input port across (in this shard, or across the cut)."""
    prm, port, buf, sc = st.prm, st.port, st.buf, st.sc
    pk, fl = buf[slot, PKT], buf[slot, FLAG]
    m.links[ms.TOTAL_ROW, op] += 1
    if prm[W0] <= t < prm[W1]:
        m.links[ms.WINDOW_ROW, op] += 1
    if fl & HEAD and prm[PKT_LO] <= pk < prm[PKT_HI]:
        sc[HOPS_SEEN] += 1
    arrive = t + prm[FLIT_DELAY]
    ds = buf[slot, DST]
    if port[op, KIND] == REMOTE_LINK:
        n = sc[OUT_F]
        out_f = st.out_f
        out_f[n, 0] = arrive
        out_f[n, 1] = port[op, DOWN_BASE] + w
        out_f[n, 2] = pk
        out_f[n, 3] = ds
        out_f[n, 4] = fl
        sc[OUT_F] = n + 1
    else:
        push_flit(st, arrive, port[op, DOWN_ROUTER], port[op, DOWN_PORT], w, pk, ds, fl)


@inline
def eject(st, m, t, ov, pk, fl):
    """A flit reaching its terminal, which sinks it and returns the credit at once."""
    prm, m_sc, m_rec = st.prm, m.sc, m.rec
    arrive = t + prm[FLIT_DELAY]
    m.cycles[ms.EJECTED_ROW, arrive] += 1
    push_credit(st, t + prm[EJECT_CREDIT_RETURN], ov)
    tail = fl >= TAIL
    if prm[RECORD] and tail:
        ms.append(m_sc, m_rec, ms.DLV, pk, arrive, 0)
    if prm[W0] <= arrive < prm[W1]:
        m.by_src[ms.EJECTED_ROW, pk % prm[N]] += 1
    if arrive < prm[W0] or arrive >= prm[HORIZON]:  # a saturated run is cut at the horizon
        return
    if prm[PKT_LO] <= pk < prm[PKT_HI]:
        m_sc[ms.LAT_SUM] += arrive - pk // prm[N]
        m_sc[ms.LAT_COUNT] += 1
        if tail:
            m_sc[ms.EJECTED] += 1
            ms.append(m_sc, m_rec, ms.EJ, pk, arrive, 0)


@inline
def enqueue(st, m, t, r, dst, length):
    """A new packet joins its source queue (an unbounded FIFO, as BookSim2's)."""
    prm, node, sq, sc = st.prm, st.node, st.sq, st.sc
    cnt = node[r, SQ_COUNT]
    slot = wrap(node[r, SQ_HEAD] + cnt, sq.shape[1])
    g = node[r, ROUTER]
    sq[r, slot, PKT] = t * prm[N] + g
    sq[r, slot, DST] = dst
    sq[r, slot, LENGTH] = length
    node[r, SQ_COUNT] = cnt + 1
    sc[QUEUED] += 1
    sc[QUEUED_FLITS] += length
    m.cycles[ms.CREATED_ROW, t] += length
    if prm[W0] <= t < prm[W1]:
        m.sc[ms.CREATED] += 1
        m.by_src[ms.CREATED_ROW, g] += length


@inline
def send_from_sources(st, m, t):
    """Each node with a waiting packet sends one flit into its router, credit permitting:
    a head takes a free, non-full injection VC, round robin after the last one used."""
    prm, node, sq, credit, sc = st.prm, st.node, st.sq, st.credit, st.sc
    v_, ni = prm[V], prm[NI]
    for r in range(prm[NL]):
        if node[r, SQ_COUNT] == 0:
            continue
        sv = node[r, SRC_VC]
        c0 = ni + r * v_  # the node's injection VCs' credit counters
        if sv < 0:
            used = node[r, INJ_IN_USE]
            w = node[r, INJ_LAST]
            for _ in range(v_):
                w = wrap(w + 1, v_)
                if not (used >> w) & 1 and credit[c0 + w] > 0:
                    sv = w
                    break
            if sv < 0:
                continue
        elif credit[c0 + sv] <= 0:
            continue
        qh = node[r, SQ_HEAD]
        pk, ds, ln = sq[r, qh, PKT], sq[r, qh, DST], sq[r, qh, LENGTH]
        fi = node[r, SRC_FLIT]
        is_head = fi == 0
        is_tail = fi == ln - 1
        bit = np.int64(1) << sv
        if is_head:
            node[r, SRC_VC] = sv
            node[r, INJ_IN_USE] |= bit
            node[r, INJ_LAST] = sv
        if is_tail:
            node[r, INJ_IN_USE] &= ~bit
            node[r, SRC_VC] = -1
            node[r, SRC_FLIT] = 0
        else:
            node[r, SRC_FLIT] = fi + 1
        credit[c0 + sv] -= 1
        sc[QUEUED_FLITS] -= 1
        if is_head and t < prm[HORIZON] and prm[PKT_LO] <= pk < prm[PKT_HI]:
            ms.append(m.sc, m.rec, ms.INJ, pk, ds, t)
        if is_tail:
            node[r, SQ_HEAD] = wrap(qh + 1, sq.shape[1])
            node[r, SQ_COUNT] -= 1
            sc[QUEUED] -= 1
        push_flit(st, t + prm[INJECT_DELAY], r, r * prm[P] + LOCAL, sv, pk, ds, HEAD * is_head + TAIL * is_tail)


@inline
def next_creation(cre, cursor, more):
    """Earliest synthetic creation not yet taken; -1: the next chunk must be made first."""
    pos = cursor[CRE_POS]
    if pos < cre.shape[1]:
        return cre[0, pos]
    return -1 if more else NEVER


@inline
def lacks(st, src, m, t, chunk_end, room):
    """What the cycle ``t`` would need that Python must provide first (DONE: nothing)."""
    prm, m_sc, node, sq, cre, scr = st.prm, m.sc, st.node, st.sq, src.cre, src.scr
    if t + prm[FLIT_DELAY] >= m.cycles.shape[1]:
        return NEED_CYCLES
    if (st.out_f.shape[0] - st.sc[OUT_F] < room or st.out_c.shape[0] - st.sc[OUT_C] < room
            or m.rec.shape[1] - max(m_sc[ms.N_INJ], m_sc[ms.N_EJ], m_sc[ms.N_DLV]) < room):
        return NEED_ROOM
    if prm[SYNTHETIC] and t >= chunk_end:
        return NEED_CHUNK
    pos = src.cursor[CRE_POS]
    if pos < cre.shape[1] and cre[0, pos] < t:
        return SKIPPED
    q = sq.shape[1]
    while pos < cre.shape[1] and cre[0, pos] == t:
        if node[cre[1, pos], SQ_COUNT] >= q - 1:
            return NEED_QUEUE
        pos += 1
    spos = src.cursor[SCR_POS]
    while spos < scr.shape[1] and scr[0, spos] <= t:
        if node[scr[1, spos], SQ_COUNT] >= q - 1:
            return NEED_QUEUE
        spos += 1
    return DONE


@inline
def ahead(st, s, r):
    """Ask for the lines router ``r``'s turn in this cycle (slot ``s``) will touch at random,
    a few routers before it: the route-table row of each flit due at its input ports and the
    buffer slot it will fill, and the front flit of each of its VCs that waits for the switch.
    Its other rows are read in router order, which the hardware prefetches by itself."""
    prm, vc, wheel_f = st.prm, st.vc, st.wheel_f
    p_, v_, b_ = prm[P], prm[V], prm[B]
    rowb = st.buf.strides[0]
    due = st.wheel_r[s, r]
    while due:
        j = r * p_ + trailing_zeros(due)
        due &= due - 1
        prefetch(st.route, r * prm[N] + wheel_f[s, j, F_DST])
        i = j * v_ + wheel_f[s, j, F_VC1] - 1
        prefetch(st.buf, (i * b_ + wrap(vc[i, Q_HEAD] + vc[i, Q_COUNT], b_)) * rowb)
    ports = st.node[r, WAITING]
    while ports:
        j = r * p_ + trailing_zeros(ports)
        ports &= ports - 1
        sa = st.port[j, SA_WAIT]
        while sa:
            i = j * v_ + trailing_zeros(sa)
            sa &= sa - 1
            prefetch(st.buf, (i * b_ + vc[i, Q_HEAD]) * rowb)


@kernel
def run(t, t1, chunk_end, more, room, tables, source, meter):
    """Simulate cycles [t, t1); returns (cycle reached, why it returned). ``chunk_end``: end
    of the synthetic chunk ``cre``; ``more``: a next chunk is due before the horizon;
    ``room``: rows every output and record buffer must have free before a cycle;
    ``tables``, ``source``, ``meter``: the ``Tables``, ``SourceTables`` and ``MeasureTables``
    of the shard, as plain tuples."""
    # the static parameters as a tuple: values the compiler keeps in registers (an array's
    # would be loaded again after every store, since any array may alias it)
    st = Tables(to_fixed_tuple(tables[0], PRM_SIZE), *tables[1:])
    src, m = SourceTables(*source), MeasureTables(*meter)
    prm, sc, node, wheel_n, m_sc = st.prm, st.sc, st.node, st.wheel_n, m.sc
    cre, scr, cursor = src.cre, src.scr, src.cursor
    w = st.wheel_f.shape[0]
    while t < t1:
        if sc[BUFFERED] == 0 and sc[QUEUED] == 0:  # idle: skip to the next event
            nxt = wheel_next(wheel_n, t)
            if scr.shape[1] > cursor[SCR_POS] and scr[0, cursor[SCR_POS]] < nxt:
                nxt = scr[0, cursor[SCR_POS]]
            if prm[SYNTHETIC]:
                c = next_creation(cre, cursor, more)
                if c < 0:
                    return t, NEED_CHUNK
                if c < nxt:
                    nxt = c
            if nxt >= t1:
                break
            t = nxt
        why = lacks(st, src, m, t, chunk_end, room)  # before the cycle: everything it may need
        if why != DONE:
            return t, why
        # credits, then arrivals
        s = t & (w - 1)
        for k in range(wheel_n[1, s]):
            st.credit[st.wheel_c[s, k]] += 1  # at most one credit per counter per cycle
        wheel_n[1, s] = 0
        nf = wheel_n[0, s]
        wheel_n[0, s] = 0
        sc[IN_FLIGHT] -= nf
        p_, nl, look = prm[P], prm[NL], prm[AHEAD]
        for r in range(nl):
            if look and r + look < nl:
                ahead(st, s, r + look)
            due = st.wheel_r[s, r]
            if due:
                st.wheel_r[s, r] = 0
                while due:
                    p = trailing_zeros(due)
                    due &= due - 1
                    receive(st, s, t, r, p, r * p_ + p)
            if node[r, WAITING]:
                allocate(st, m, t, r)
        # hops of measured packets count until every measured packet is out
        if sc[HOPS_SEEN]:
            if t >= prm[W0] and (t < prm[W1] or m_sc[ms.EJECTED] < m_sc[ms.CREATED]) and t < prm[HORIZON]:
                m_sc[ms.HOPS] += sc[HOPS_SEEN]
            sc[HOPS_SEEN] = 0
        # new packets (synthetic first, then scripted), then the sources send
        pos = cursor[CRE_POS]
        while pos < cre.shape[1] and cre[0, pos] == t:
            enqueue(st, m, t, cre[1, pos], cre[2, pos], prm[PACKET_FLITS])
            pos += 1
        cursor[CRE_POS] = pos
        spos = cursor[SCR_POS]
        while spos < scr.shape[1] and scr[0, spos] <= t:
            enqueue(st, m, t, scr[1, spos], scr[2, spos], scr[3, spos])
            spos += 1
        cursor[SCR_POS] = spos
        if sc[QUEUED]:
            send_from_sources(st, m, t)
        t += 1
    sc[WHEEL_NEXT] = wheel_next(wheel_n, t)
    return t, DONE


@kernel
def earliest_output(tables, source, later, chunk_end, more, t, cut, order, floor, out):
    """``out[j]``: the earliest cycle a flit or credit now held here (from cycle ``t`` on)
    could be due in shard ``j`` (sim/noc/cut.py), each hop at its least delay (a body flit's:
    ``flit_delay``). ``later``: inbound flits due beyond the event wheel; ``cut``: (route,
    nxt_local, exit_to, in_from, reach, reach_min, adjacent, relay); ``order``/``floor``:
    routers by the least delay from anything there to another shard, so the scan stops where
    nothing can lower a bound. ``tables``, ``source``: as ``run`` takes them."""
    st, src = Tables(*tables), SourceTables(*source)
    prm, vc, buf, node, sq, wheel_f, wheel_r = st.prm, st.vc, st.buf, st.node, st.sq, st.wheel_f, st.wheel_r
    in_from, adjacent = cut[3], cut[6]
    n, p_, v_, b_, fd, cr, inj = prm[N], prm[P], prm[V], prm[B], prm[FLIT_DELAY], prm[CREDIT_RETURN], prm[INJECT_DELAY]
    w = wheel_f.shape[0]
    for j in range(out.shape[0]):
        out[j] = NEVER
    for k in range(order.shape[0]):
        r = order[k]
        if t + floor[r] >= cap_of(out, adjacent):
            break
        for j in range(r * p_, r * p_ + p_):
            up = in_from[j]  # a flit leaving this input port returns a credit to ``up``
            for v in range(v_):  # buffered flits: granted at t at the earliest
                i = j * v_ + v
                cnt = vc[i, Q_COUNT]
                if cnt == 0:
                    continue
                if up >= 0:
                    lower(out, up, t + cr)
                for q in range(cnt):
                    dst = buf[i * b_ + wrap(vc[i, Q_HEAD] + q, b_), DST]
                    walk(cut, out, n, p_, r, dst, t, fd, fd)
        for d in range(w):  # flits due at its input ports
            s = (t + d) & (w - 1)
            if wheel_r[s, r] == 0:
                continue
            for j in range(r * p_, r * p_ + p_):
                if wheel_f[s, j, F_VC1]:
                    if in_from[j] >= 0:
                        lower(out, in_from[j], t + d + cr)
                    walk(cut, out, n, p_, r, wheel_f[s, j, F_DST], t + d, fd, fd)
        qn = sq.shape[1]
        for q in range(node[r, SQ_COUNT]):  # queued at its source: in the router inj cycles later
            dst = sq[r, wrap(node[r, SQ_HEAD] + q, qn), DST]
            walk(cut, out, n, p_, r, dst, t + inj, fd, fd)
    pv = prm[PV]
    for k in range(later.shape[1]):  # inbound flits due beyond the event wheel
        g = later[1, k] // pv
        r = st.local_of[g]
        j = r * p_ + (later[1, k] - g * pv) // v_
        if in_from[j] >= 0:
            lower(out, in_from[j], later[0, k] + cr)
        walk(cut, out, n, p_, r, later[3, k], later[0, k], fd, fd)
    offered(cut, out, n, p_, src.scr, src.cre, src.cursor, prm[SYNTHETIC], more, chunk_end, inj, fd, fd)
