"""What a shard holds that could cross its cut, and when at the earliest (both NoC models).

Conservative parallel simulation may let every shard run up to the earliest cycle anything
could arrive from another shard (Chandy & Misra 1979: lookahead from the sender's state,
not only from one link). A NoC shard answers that per neighbour: for every packet or flit
it holds (in a buffer, on a link inside the shard, queued at a source, offered for later),
the cycle its route first leaves the shard if every router on the way served it at once;
with ``relay``, a packet that reaches a terminal of the shard may make that terminal send
``relay`` cycles later (the chip's units), towards any shard.

``CutTables`` holds the static part (built once, when the shard learns who owns each
router); ``walk`` is the compiled step both kernels use. Routes are the shard's route table
(minimal, dimension order), so a route leaves a rectangle at most once before its
destination (docs/design.md, "Adding a routing function").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.noc import ports
from sim.noc import topology as topo
from sim.noc.jit import inline
from sim.noc.sources import CRE_POS, SCR_POS

HALF = np.int64(1) << np.int64(60)  # "unreachable" in tables that get cycles added to them


@inline
def lower(out, j, v):
    if v < out[j]:
        out[j] = v


@inline
def walk(cut, out, n, p_, rtr, dst, t, step, eject_delay):
    """A packet (or flit) at local router ``rtr``, bound for ``dst``, that could be granted its
    output at cycle ``t``: lower ``out[j]`` to the cycle it could reach shard ``j``. Each
    hop takes at least ``step`` cycles; the terminal takes it ``eject_delay`` after a grant
    and, when ``relay >= 0``, may send ``relay`` cycles after that, towards any shard (its
    packets first enter one of the ``adjacent`` shards). ``cut``: CutTables.kernel_args."""
    route, nxt_local, exit_to, _, reach, _, adjacent, relay = cut
    while True:
        o = route[rtr * n + dst]
        op = rtr * p_ + o
        if o == 0:  # its destination: the terminal
            if relay >= 0:
                a = t + eject_delay + relay
                for k in range(adjacent.shape[0]):
                    lower(out, adjacent[k], a + reach[rtr, adjacent[k]])
            return
        j = exit_to[op]
        if j >= 0:
            lower(out, j, t + step)
            return
        rtr = nxt_local[op]
        t += step


@inline
def _scan(cut, out, n, p_, packets, start, first, step, eject_delay):
    """``packets`` [cycle, src, dst] rows from ``start`` on, sorted by cycle (``offered``)."""
    adjacent = cut[6]
    for pos in range(start, packets.shape[1]):
        c = packets[0, pos] + first
        if c + step >= cap_of(out, adjacent):
            break
        walk(cut, out, n, p_, packets[1, pos], packets[2, pos], c, step, eject_delay)


@inline
def offered(cut, out, n, p_, scr, cre, cursor, synthetic, more, chunk_end, first, step, eject_delay):
    """Packets the shard's source has yet to inject, scripted (``scr``) and, under synthetic
    traffic, created (``cre``), each granted ``first`` cycles after its cycle at the
    earliest; both are sorted by cycle, so the scans stop where nothing can lower a bound.
    ``more``: a chunk not drawn yet, whose packets may go anywhere from ``chunk_end`` on."""
    reach_min, adjacent = cut[5], cut[6]
    _scan(cut, out, n, p_, scr, cursor[SCR_POS], first, step, eject_delay)
    if synthetic:
        _scan(cut, out, n, p_, cre, cursor[CRE_POS], first, step, eject_delay)
        if more:
            for k in range(adjacent.shape[0]):
                lower(out, adjacent[k], chunk_end + reach_min[adjacent[k]])


@inline
def cap_of(out, adjacent):
    """The latest of the bounds found so far over the shards a route can enter first (a
    candidate no earlier than this cannot lower any of them)."""
    c = np.int64(0)
    for j in range(adjacent.shape[0]):
        if out[adjacent[j]] > c:
            c = out[adjacent[j]]
    return c


def region_hops(grid: topo.Grid, owner: np.ndarray, shards: int) -> np.ndarray:
    """[shards, routers] least hops from every router to the nearest router of each shard."""
    nbr = grid.neighbor(np.arange(grid.n)[:, None], np.arange(1, ports.PORTS)[None, :])  # [N, 4]
    has = nbr >= 0
    safe = np.maximum(nbr, 0)
    out = np.empty((shards, grid.n), dtype=np.int64)
    for j in range(shards):
        d = np.where(owner == j, 0, HALF)
        while True:  # relax until no distance changes: at most the grid's diameter rounds
            cand = np.where(has, d[safe] + 1, HALF).min(axis=1)
            nd = np.minimum(d, cand)
            if (nd == d).all():
                break
            d = nd
        out[j] = d
    return out


@dataclass(frozen=True)
class CutTables:
    """The shard's side of the cuts: where each output port leads and how far every router
    is from every other shard."""

    shard: int  # this shard's index
    exit_to: np.ndarray  # [nl * P] the shard an output port's link enters, -1 inside or none
    nxt_local: np.ndarray  # [nl * P] the local router an output port leads to, -1 otherwise
    in_from: np.ndarray  # [nl * P] the shard feeding an input port (its credits go there), -1 otherwise
    hops: np.ndarray  # [nl, shards] least hops from each router into each shard (HALF: own)
    adjacent: np.ndarray  # shards a route from here can enter first (across a cut link)
    relay: int  # -1: terminals only sink; else cycles from a delivery to the terminal sending

    @property
    def shards(self) -> int:
        return self.hops.shape[1]

    @classmethod
    def build(cls, grid: topo.Grid, routers: np.ndarray, owner: np.ndarray, relay: int = -1) -> "CutTables":
        shards = int(owner.max()) + 1
        me = int(owner[routers[0]])
        nbr = grid.neighbor(routers[:, None], np.arange(ports.PORTS)[None, :]).ravel()
        local_of = np.full(grid.n, -1, dtype=np.int64)
        local_of[routers] = np.arange(len(routers))
        across = np.where(nbr >= 0, owner[np.maximum(nbr, 0)], -1)
        foreign = (nbr >= 0) & (across != me)
        exit_to = np.where(foreign, across, -1).astype(np.int64)
        nxt_local = np.where((nbr >= 0) & ~foreign, local_of[np.maximum(nbr, 0)], -1).astype(np.int64)
        hops = region_hops(grid, owner, shards)[:, routers].T.copy()
        hops[:, me] = HALF
        adjacent = np.unique(exit_to[exit_to >= 0]).astype(np.int64)
        # links come in twins: input port p is fed by the router across output port p
        return cls(me, exit_to, nxt_local, exit_to.copy(), hops, adjacent, int(relay))

    def reach(self, first: int, step: int) -> np.ndarray:
        """[nl, shards] least cycles from a packet offered at a router (any destination) to
        its arrival in each adjacent shard (HALF for the others: a route enters an adjacent
        shard first): ``first`` to its first grant, ``step`` a hop."""
        near = np.zeros(self.shards, dtype=bool)
        near[self.adjacent] = True
        return np.where(near[None, :], first + np.minimum(self.hops, HALF // 16) * step, HALF).astype(np.int64)

    def kernel_args(self, route: np.ndarray, reach: np.ndarray) -> tuple:
        """What both kernels' ``earliest_output`` take as ``cut``."""
        reach_min = reach.min(axis=0) if len(reach) else np.full(self.shards, HALF, dtype=np.int64)
        return (route, self.nxt_local, self.exit_to, self.in_from, reach, reach_min, self.adjacent,
                np.int64(self.relay))


def bounds_of(cycles: np.ndarray) -> np.ndarray:
    """Kernel cycles as floats, "never" as infinity."""
    out = cycles.astype(np.float64)
    out[cycles >= HALF] = np.inf
    return out
