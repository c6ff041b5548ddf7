"""The cycle-level router pipeline, compiled: credits, arrivals, VC allocation, switch
allocation, traversal and injection of every router of a shard, cycle after cycle.

``run`` simulates cycles [t, t1) of one shard in machine code (sim/noc/jit.py) and
returns to Python only when it is done or needs something Python provides: the next
chunk of synthetic packets, or room in a growable buffer (it checks before a cycle, so a
cycle is never left half done). The model is NocShard's (sim/noc/shard.py documents the
router and the index conventions); this file holds only its arithmetic.

A cycle: the credits due, then router by router: the flits due at its input ports are
written into their VCs, its VC and switch allocators run, and the winners leave (to the
next router's input port a few cycles on, or to the terminal); then new packets and the
sources. Within a cycle a router reads and writes only its own state (what it sends is
due in a later cycle), so visiting routers one after the other gives BookSim2's IQRouter's
winners; and every arbiter's keys are distinct within its group (a requester's
round-robin position), so the order requests are visited in never matters either. Hops of
measured packets are added once the cycle's ejections are known.

State lives in a few int64 tables (columns named below): ``vc[i]`` input VC ``i`` and
output VC ``i`` of the same (router, port, vc), ``wait[i]`` which allocator it waits for
(a byte, so a router's VCs are scanned in one cache line) and ``ready[i]`` from which
cycle on; ``port[j]`` input and output
port ``j`` with its static wiring (what it feeds, where its credits go); ``node[r]``
router ``r``: its terminal's source queue, its occupancy and how many of its VCs wait for
an allocator; the event wheel holds what is due in the next ``W`` cycles (every delay is
shorter than ``W``): ``wheel_f[s, j]`` the flit due at input port ``j`` (a port takes at
most one a cycle), ``wheel_c[s]`` credits. Router ``r``'s rows are contiguous in every
table and a cycle visits the routers in order, so what a cycle touches streams through
the cache (the footprint is what limits large grids). The hot paths divide by nothing (a
64-bit division costs tens of cycles): indices come from the loops and the static
columns, and every modulo is of a sum below twice the modulus.
"""

from __future__ import annotations

import numpy as np

from sim.noc import measure as ms
from sim.noc.cut import cap_of, lower, offered, walk
from sim.noc.jit import inline, kernel
from sim.noc.sources import CRE_POS, SCR_POS

HEAD, TAIL = 1, 2
LOCAL = 0  # the terminal's port
EAST, WEST, SOUTH, NORTH = 1, 2, 3, 4
EJECT, LOCAL_LINK, REMOTE_LINK, NO_LINK = 0, 1, 2, 3  # output-port kinds (port[:, KIND])
IDLE, WAIT_VC, WAIT_SWITCH = 0, 1, 2  # what an input VC waits for (``wait``, a byte per VC)
BIG = np.int64(1) << np.int64(62)

# prm: static parameters
(N, NL, P, V, B, PV, NI, COLS, TORUS, ROUTING_DELAY, VC_ALLOC_DELAY, FLIT_DELAY, CREDIT_RETURN,
 INJECT_DELAY, INJECT_CREDIT_RETURN, EJECT_CREDIT_RETURN, PACKET_FLITS, SYNTHETIC, RECORD, W0, W1,
 HORIZON, PKT_LO, PKT_HI, CLASS0_BITS, CLASS1_BITS, PRM_SIZE) = range(27)
# sc: shard scalars
(BUFFERED, QUEUED, QUEUED_FLITS, HOPS_SEEN, OUT_F, OUT_C, IN_FLIGHT, WHEEL_NEXT, SC_SIZE) = range(9)
# vc columns (state): input-VC side, then output-VC side
Q_HEAD, Q_COUNT, OUT_OP, OUT_VC, VA_IN_NPTR, VA_OUT_NPTR, VC_COLS = range(7)
# port columns: allocation state, then static: kind, router across (global, -1 none),
# port number, the port's first VC index within the router (o * vcs); for an input port the
# first of the credit counters its VCs' credits go to (an upstream output VC, global across
# a cut; the source's for the terminal's port); for an output port the first input VC it
# feeds (global across a cut), that input port and its router (local)
(FREE_VCS, SA_IN_NPTR, SA_VC_NOFF, SA_OUT_NPTR, KIND, NBR, PNUM, PV_OFF, UP_BASE, DOWN_BASE,
 DOWN_PORT, DOWN_ROUTER, PORT_COLS) = range(13)
# node columns
(SQ_HEAD, SQ_COUNT, SRC_FLIT, SRC_VC, INJ_LAST, INJ_IN_USE, ROUTER, OCCUPANCY, WAITING,
 NODE_COLS) = range(10)
# work rows: arbiter scratch, indexed within one router
KEY_A, WHO_A, LIST_A, KEY_B, WHO_B, LIST_B, IN_PORT, WORK_ROWS = range(8)
# wheel_f columns: VC + 1 (0: no flit), packet, destination, flags
F_VC1, F_PKT, F_DST, F_FLAG = range(4)
# buf / sq columns
PKT, DST, FLAG = 0, 1, 2
LENGTH = 2
# why run returned
DONE, NEED_CHUNK, NEED_CYCLES, NEED_ROOM, NEED_QUEUE, SKIPPED = range(6)


@inline
def wrap(x, m):
    """``x mod m`` for 0 <= x < 2 m."""
    return x - m if x >= m else x


@inline
def push_flit(wheel_f, wheel_n, wheel_r, sc, due, r, j, v, pkt, dst, flag):
    """A flit due at VC ``v`` of input port ``j`` (of router ``r``, local ids) at ``due``."""
    s = due & (wheel_f.shape[0] - 1)
    if wheel_f[s, j, F_VC1]:
        raise RuntimeError("two flits due at one input port in one cycle")
    wheel_f[s, j, F_VC1] = v + 1
    wheel_f[s, j, F_PKT] = pkt
    wheel_f[s, j, F_DST] = dst
    wheel_f[s, j, F_FLAG] = flag
    wheel_n[0, s] += 1
    wheel_r[s, r] += 1
    sc[IN_FLIGHT] += 1


@inline
def push_credit(wheel_c, wheel_n, due, counter):
    s = due & (wheel_c.shape[0] - 1)
    k = wheel_n[1, s]
    if k >= wheel_c.shape[1]:
        raise RuntimeError("more credits due in one cycle than credit counters")
    wheel_c[s, k] = counter
    wheel_n[1, s] = k + 1


@inline
def wheel_next(wheel_n, t):
    """Earliest cycle >= t with a flit or credit due (BIG when the wheel is empty)."""
    w = wheel_n.shape[1]
    for k in range(w):
        s = (t + k) & (w - 1)
        if wheel_n[0, s] or wheel_n[1, s]:
            return t + k
    return BIG


@kernel
def accept(prm, sc, local_of, wheel_f, wheel_c, wheel_n, wheel_r, t0, flits, credits):
    """Queue inbound boundary traffic: flits (due, global input VC, packet, destination,
    flags) and credits (due, global output VC), all due in [t0, t0 + W)."""
    pv = prm[PV]
    w = wheel_f.shape[0]
    for k in range(flits.shape[1]):
        due = flits[0, k]
        if due < t0 or due >= t0 + w:
            raise RuntimeError("inbound flit due outside the event wheel")
        g = flits[1, k] // pv
        r = local_of[g]
        rest = flits[1, k] - g * pv  # port * vcs + vc
        push_flit(wheel_f, wheel_n, wheel_r, sc, due, r, r * prm[P] + rest // prm[V], rest % prm[V],
                  flits[2, k], flits[3, k], flits[4, k])
    for k in range(credits.shape[1]):
        due = credits[0, k]
        if due < t0 or due >= t0 + w:
            raise RuntimeError("inbound credit due outside the event wheel")
        g = credits[1, k] // pv
        push_credit(wheel_c, wheel_n, due, local_of[g] * pv + credits[1, k] - g * pv)
    sc[WHEEL_NEXT] = wheel_next(wheel_n, t0)


@inline
def wait_for_vc(prm, vc, wait, ready, route, i, r, dst, when):
    """A head at the front of input VC ``i`` of router ``r``: route it (one lookup) and bid
    for a VC."""
    vc[i, OUT_OP] = r * prm[P] + route[r * prm[N] + dst]
    ready[i] = when
    wait[i] = WAIT_VC


@inline
def receive(prm, sc, vc, wait, ready, buf, route, node, wheel_f, s, t, r, j):
    """The flit due at input port ``j`` of router ``r``, if any, enters its VC; a flit
    reaching the front of its VC starts work."""
    v1 = wheel_f[s, j, F_VC1]
    if v1 == 0:
        return
    wheel_f[s, j, F_VC1] = 0
    pkt, dst, flag = wheel_f[s, j, F_PKT], wheel_f[s, j, F_DST], wheel_f[s, j, F_FLAG]
    i = j * prm[V] + v1 - 1
    cnt = vc[i, Q_COUNT]
    slot = i * prm[B] + wrap(vc[i, Q_HEAD] + cnt, prm[B])
    buf[slot, PKT] = pkt
    buf[slot, DST] = dst
    buf[slot, FLAG] = flag
    vc[i, Q_COUNT] = cnt + 1
    sc[BUFFERED] += 1
    node[r, OCCUPANCY] += 1
    if cnt == 0:
        node[r, WAITING] += 1
        if flag & HEAD:
            wait_for_vc(prm, vc, wait, ready, route, i, r, dst, t + prm[ROUTING_DELAY])
        else:  # a body flit reaching an empty active VC may bid for the switch at once
            ready[i] = t
            wait[i] = WAIT_SWITCH


@inline
def claim(work, key_row, who_row, list_row, n_listed, group, key, who):
    """Round-robin arbitration: the smallest key of a group wins. Returns the new length
    of the list of groups that have a request."""
    old = work[key_row, group]
    if old == BIG:
        work[list_row, n_listed] = group
        n_listed += 1
    if key < old:
        work[key_row, group] = key
        work[who_row, group] = who
    return n_listed


@inline
def dateline_bits(prm, vc, buf, port, i, op):
    """VCs a head may take on a torus: the half of its dateline class (all at the terminal)."""
    o = port[op, PNUM]
    if o == LOCAL:
        return (np.int64(1) << prm[V]) - 1
    cols = prm[COLS]
    src = buf[i * prm[B] + vc[i, Q_HEAD], PKT] % prm[N]
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
def allocate(prm, sc, vc, wait, ready, credit, port, buf, route, node, first_free, work, wheel_f, wheel_c,
             wheel_n, wheel_r, m_sc, m_cycles, m_src, m_links, m_rec, out_f, out_c, t, r):
    """Router ``r``'s separable input-first VC and switch allocators, one iteration each,
    round-robin arbiters; switch winners leave their buffers, traverse the switch and
    their link (or reach their terminal)."""
    p_, v_, b, pv = prm[P], prm[V], prm[B], prm[PV]
    base, pbase = r * pv, r * p_
    nt = 0  # VC allocation requests, by output VC (local index)
    na = 0  # switch requests, by input port (local index)
    for p in range(p_):
        ip = pbase + p
        for v in range(v_):
            inl = p * v_ + v  # the VC's index within the router
            i = base + inl
            state = wait[i]
            if state == WAIT_VC:
                if ready[i] > t:
                    continue
                op = vc[i, OUT_OP]
                bits = port[op, FREE_VCS]
                if prm[TORUS]:
                    bits &= dateline_bits(prm, vc, buf, port, i, op)
                # input stage: the first free output VC of its port in round-robin order
                # over (port, vc) from its pointer; inside one port that is cyclic from the
                # pointer if it points into the port, else from VC 0
                rel = (pv - vc[i, VA_IN_NPTR]) - port[op, PV_OFF]
                start = rel if 0 <= rel < v_ else 0
                pick = first_free[bits * v_ + start]
                if pick < 0:
                    continue
                target = op * v_ + pick
                # output stage: each output VC grants one of the input VCs that picked it
                nt = claim(work, KEY_A, WHO_A, LIST_A, nt, target - base,
                           wrap(inl + vc[target, VA_OUT_NPTR], pv), i)
            elif state == WAIT_SWITCH:
                if ready[i] > t or credit[vc[i, OUT_VC]] <= 0:
                    continue
                # input stage: one VC per input port; round robin over outputs, then over VCs
                key = (wrap(port[vc[i, OUT_OP], PNUM] + port[ip, SA_IN_NPTR], p_) * v_
                       + wrap(v + port[ip, SA_VC_NOFF], v_))
                na = claim(work, KEY_B, WHO_B, LIST_B, na, p, key, i)
    for k in range(nt):
        tl = work[LIST_A, k]
        i = work[WHO_A, tl]
        work[KEY_A, tl] = BIG
        target = base + tl
        op = vc[i, OUT_OP]
        pick = target - op * v_
        port[op, FREE_VCS] -= np.int64(1) << pick
        vc[i, OUT_VC] = target
        ready[i] = t + prm[VC_ALLOC_DELAY]  # >= t + 1: not a switch request this cycle
        vc[i, VA_IN_NPTR] = pv - wrap(port[op, PV_OFF] + pick + 1, pv)
        vc[target, VA_OUT_NPTR] = pv - wrap(i - base + 1, pv)
        wait[i] = WAIT_SWITCH
    if na == 0:
        return
    # output stage: one input port per output port
    nb = 0
    for k in range(na):
        p = work[LIST_B, k]
        i = work[WHO_B, p]
        work[KEY_B, p] = BIG
        work[IN_PORT, i - base] = p
        op = vc[i, OUT_OP]
        nb = claim(work, KEY_A, WHO_A, LIST_A, nb, op - pbase, wrap(p + port[op, SA_OUT_NPTR], p_), i)
    # winners: pointers, dequeue, credits upstream, traversal or ejection
    for k in range(nb):
        opl = work[LIST_A, k]
        i = work[WHO_A, opl]
        work[KEY_A, opl] = BIG
        op = pbase + opl
        p = work[IN_PORT, i - base]
        ip = pbase + p
        v = i - base - p * v_
        ov = vc[i, OUT_VC]
        port[ip, SA_IN_NPTR] = p_ - wrap(opl + 1, p_)
        port[ip, SA_VC_NOFF] = v_ - wrap(v + 1, v_)
        port[op, SA_OUT_NPTR] = p_ - wrap(p + 1, p_)
        head = vc[i, Q_HEAD]
        slot = i * b + head
        pk, fl = buf[slot, PKT], buf[slot, FLAG]
        vc[i, Q_HEAD] = wrap(head + 1, b)
        cnt = vc[i, Q_COUNT] - 1
        vc[i, Q_COUNT] = cnt
        sc[BUFFERED] -= 1
        node[r, OCCUPANCY] -= 1
        credit[ov] -= 1
        w = ov - op * v_  # the output VC's number
        if fl >= TAIL:
            port[op, FREE_VCS] += np.int64(1) << w  # the output VC is free again
            if cnt > 0:  # the next packet's head already waits behind the tail
                wait_for_vc(prm, vc, wait, ready, route, i, r, buf[i * b + vc[i, Q_HEAD], DST],
                            t + 1 + prm[ROUTING_DELAY])
            else:
                wait[i] = IDLE
                node[r, WAITING] -= 1
        else:
            ready[i] = t + 1  # the next flit of the packet may go next cycle
            if cnt == 0:
                wait[i] = IDLE
                node[r, WAITING] -= 1
        # the flit frees a slot: its credit goes upstream
        tgt = port[ip, UP_BASE] + v
        if port[ip, KIND] == REMOTE_LINK:
            n = sc[OUT_C]
            out_c[n, 0] = t + prm[CREDIT_RETURN]
            out_c[n, 1] = tgt
            sc[OUT_C] = n + 1
        elif p == LOCAL:
            push_credit(wheel_c, wheel_n, t + prm[INJECT_CREDIT_RETURN], tgt)
        else:
            push_credit(wheel_c, wheel_n, t + prm[CREDIT_RETURN], tgt)
        if opl == LOCAL:
            eject(prm, wheel_c, wheel_n, m_sc, m_cycles, m_src, m_rec, t, ov, pk, fl)
            continue
        m_links[ms.TOTAL_ROW, op] += 1
        if prm[W0] <= t < prm[W1]:
            m_links[ms.WINDOW_ROW, op] += 1
        if fl & HEAD and prm[PKT_LO] <= pk < prm[PKT_HI]:
            sc[HOPS_SEEN] += 1
        arrive = t + prm[FLIT_DELAY]
        ds = buf[slot, DST]
        if port[op, KIND] == REMOTE_LINK:
            n = sc[OUT_F]
            out_f[n, 0] = arrive
            out_f[n, 1] = port[op, DOWN_BASE] + w
            out_f[n, 2] = pk
            out_f[n, 3] = ds
            out_f[n, 4] = fl
            sc[OUT_F] = n + 1
        else:
            push_flit(wheel_f, wheel_n, wheel_r, sc, arrive, port[op, DOWN_ROUTER], port[op, DOWN_PORT], w, pk,
                      ds, fl)


@inline
def eject(prm, wheel_c, wheel_n, m_sc, m_cycles, m_src, m_rec, t, ov, pk, fl):
    """A flit reaching its terminal, which sinks it and returns the credit at once."""
    arrive = t + prm[FLIT_DELAY]
    m_cycles[ms.EJECTED_ROW, arrive] += 1
    push_credit(wheel_c, wheel_n, t + prm[EJECT_CREDIT_RETURN], ov)
    tail = fl >= TAIL
    if prm[RECORD] and tail:
        ms.append(m_sc, m_rec, ms.DLV, pk, arrive, 0)
    if prm[W0] <= arrive < prm[W1]:
        m_src[ms.EJECTED_ROW, pk % prm[N]] += 1
    if arrive < prm[W0] or arrive >= prm[HORIZON]:  # a saturated run is cut at the horizon
        return
    if prm[PKT_LO] <= pk < prm[PKT_HI]:
        m_sc[ms.LAT_SUM] += arrive - pk // prm[N]
        m_sc[ms.LAT_COUNT] += 1
        if tail:
            m_sc[ms.EJECTED] += 1
            ms.append(m_sc, m_rec, ms.EJ, pk, arrive, 0)


@inline
def enqueue(prm, sc, node, sq, m_sc, m_cycles, m_src, t, r, dst, length):
    """A new packet joins its source queue (an unbounded FIFO, as BookSim2's)."""
    cnt = node[r, SQ_COUNT]
    slot = wrap(node[r, SQ_HEAD] + cnt, sq.shape[1])
    g = node[r, ROUTER]
    sq[r, slot, PKT] = t * prm[N] + g
    sq[r, slot, DST] = dst
    sq[r, slot, LENGTH] = length
    node[r, SQ_COUNT] = cnt + 1
    sc[QUEUED] += 1
    sc[QUEUED_FLITS] += length
    m_cycles[ms.CREATED_ROW, t] += length
    if prm[W0] <= t < prm[W1]:
        m_sc[ms.CREATED] += 1
        m_src[ms.CREATED_ROW, g] += length


@inline
def send_from_sources(prm, sc, credit, node, sq, wheel_f, wheel_n, wheel_r, m_sc, m_rec, t):
    """Each node with a waiting packet sends one flit into its router, credit permitting:
    a head takes a free, non-full injection VC, round robin after the last one used."""
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
            ms.append(m_sc, m_rec, ms.INJ, pk, ds, t)
        if is_tail:
            node[r, SQ_HEAD] = wrap(qh + 1, sq.shape[1])
            node[r, SQ_COUNT] -= 1
            sc[QUEUED] -= 1
        push_flit(wheel_f, wheel_n, wheel_r, sc, t + prm[INJECT_DELAY], r, r * prm[P] + LOCAL, sv, pk, ds,
                  HEAD * is_head + TAIL * is_tail)


@inline
def next_creation(cre, cursor, more):
    """Earliest synthetic creation not yet taken; -1: the next chunk must be made first."""
    pos = cursor[CRE_POS]
    if pos < cre.shape[1]:
        return cre[0, pos]
    return -1 if more else BIG


@kernel
def run(t, t1, chunk_end, more, prm, sc, vc, wait, ready, credit, port, buf, route, first_free, node, sq, work,
        wheel_f, wheel_c, wheel_n, wheel_r, cre, scr, cursor, m_sc, m_cycles, m_src, m_links, m_rec, out_f, out_c,
        room):
    """Simulate cycles [t, t1); returns (cycle reached, why it returned). ``chunk_end``: end
    of the synthetic chunk ``cre``; ``more``: a next chunk is due before the horizon;
    ``room``: rows every output and record buffer must have free before a cycle."""
    w = wheel_f.shape[0]
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
        # before the cycle: everything it may need
        if t + prm[FLIT_DELAY] >= m_cycles.shape[1]:
            return t, NEED_CYCLES
        if (out_f.shape[0] - sc[OUT_F] < room or out_c.shape[0] - sc[OUT_C] < room
                or m_rec.shape[1] - max(m_sc[ms.N_INJ], m_sc[ms.N_EJ], m_sc[ms.N_DLV]) < room):
            return t, NEED_ROOM
        if prm[SYNTHETIC] and t >= chunk_end:
            return t, NEED_CHUNK
        pos = cursor[CRE_POS]
        if pos < cre.shape[1] and cre[0, pos] < t:
            return t, SKIPPED
        q = sq.shape[1]
        while pos < cre.shape[1] and cre[0, pos] == t:
            if node[cre[1, pos], SQ_COUNT] >= q - 1:
                return t, NEED_QUEUE
            pos += 1
        spos = cursor[SCR_POS]
        while spos < scr.shape[1] and scr[0, spos] <= t:
            if node[scr[1, spos], SQ_COUNT] >= q - 1:
                return t, NEED_QUEUE
            spos += 1
        # credits, then arrivals
        s = t & (w - 1)
        for k in range(wheel_n[1, s]):
            credit[wheel_c[s, k]] += 1  # at most one credit per counter per cycle
        wheel_n[1, s] = 0
        nf = wheel_n[0, s]
        wheel_n[0, s] = 0
        sc[IN_FLIGHT] -= nf
        p_ = prm[P]
        for r in range(prm[NL]):
            if wheel_r[s, r]:
                wheel_r[s, r] = 0
                for j in range(r * p_, r * p_ + p_):
                    receive(prm, sc, vc, wait, ready, buf, route, node, wheel_f, s, t, r, j)
            if node[r, WAITING]:
                allocate(prm, sc, vc, wait, ready, credit, port, buf, route, node, first_free, work, wheel_f, wheel_c,
                         wheel_n, wheel_r, m_sc, m_cycles, m_src, m_links, m_rec, out_f, out_c, t, r)
        # hops of measured packets count until every measured packet is out
        if sc[HOPS_SEEN]:
            if t >= prm[W0] and (t < prm[W1] or m_sc[ms.EJECTED] < m_sc[ms.CREATED]) and t < prm[HORIZON]:
                m_sc[ms.HOPS] += sc[HOPS_SEEN]
            sc[HOPS_SEEN] = 0
        # new packets (synthetic first, then scripted), then the sources send
        pos = cursor[CRE_POS]
        while pos < cre.shape[1] and cre[0, pos] == t:
            enqueue(prm, sc, node, sq, m_sc, m_cycles, m_src, t, cre[1, pos], cre[2, pos], prm[PACKET_FLITS])
            pos += 1
        cursor[CRE_POS] = pos
        spos = cursor[SCR_POS]
        while spos < scr.shape[1] and scr[0, spos] <= t:
            enqueue(prm, sc, node, sq, m_sc, m_cycles, m_src, t, scr[1, spos], scr[2, spos], scr[3, spos])
            spos += 1
        cursor[SCR_POS] = spos
        if sc[QUEUED]:
            send_from_sources(prm, sc, credit, node, sq, wheel_f, wheel_n, wheel_r, m_sc, m_rec, t)
        t += 1
    sc[WHEEL_NEXT] = wheel_next(wheel_n, t)
    return t, DONE


@kernel
def earliest_output(prm, vc, buf, node, sq, wheel_f, wheel_r, later, local_of, cre, scr, cursor, chunk_end, more,
                    t, cut, order, floor, out):
    """``out[j]``: the earliest cycle a flit or credit now held here (from cycle ``t`` on)
    could be due in shard ``j`` (sim/noc/cut.py), each hop at its least delay (a body flit's:
    ``flit_delay``). ``cut``: (route, nxt_local, exit_to, in_from, reach, reach_min,
    adjacent, relay); ``order``/``floor``: routers by the least delay from anything there to
    another shard, so the scan stops where nothing can lower a bound."""
    in_from, adjacent = cut[3], cut[6]
    n, p_, v_, b_, fd, cr, inj = prm[N], prm[P], prm[V], prm[B], prm[FLIT_DELAY], prm[CREDIT_RETURN], prm[INJECT_DELAY]
    w = wheel_f.shape[0]
    for j in range(out.shape[0]):
        out[j] = BIG
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
        r = local_of[g]
        j = r * p_ + (later[1, k] - g * pv) // v_
        if in_from[j] >= 0:
            lower(out, in_from[j], later[0, k] + cr)
        walk(cut, out, n, p_, r, later[3, k], later[0, k], fd, fd)
    offered(cut, out, n, p_, scr, cre, cursor, prm[SYNTHETIC], more, chunk_end, inj, fd, fd)
