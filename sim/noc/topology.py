"""Geometry of an R x C mesh or torus: ports, neighbours, dimension-order routing.

Routers are numbered row-major (``id = row * cols + col``). Every router has five
ports (sim/noc/ports.py): 0 the local terminal, 1 east (+col), 2 west (-col), 3 south
(+row), 4 north (-row); output port ``o`` of a router feeds input port ``OPPOSITE[o]`` of
its neighbour. Routing is by a registered function (sim/noc/routing.py; XY by default: columns
first, then rows), minimal; on a torus it takes
the shorter way round (on a tie, half a ring away, east/south from an even coordinate and
west/north from an odd one, so both directions carry the same load) and a packet switches to the upper half
of the virtual channels after crossing a dimension's wrap-around link (the dateline),
which makes dimension-order routing on rings deadlock-free (Dally & Seitz, 1987).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.noc.ports import DCOL, DIRECTION, DROW, EAST, LOCAL, NORTH, OPPOSITE, PORTS, SOUTH, WEST
from sim.noc.routing import ROUTINGS

# the port constants, for callers that think in grid terms (declared in sim/noc/ports.py)
__all__ = ["DIRECTION", "EAST", "LOCAL", "NORTH", "OPPOSITE", "PORTS", "SOUTH", "WEST", "Grid", "Region"]


@dataclass(frozen=True)
class Grid:
    rows: int
    cols: int
    torus: bool = False
    routing: str = "xy"  # a registered routing function (sim/noc/routing.py)

    @property
    def n(self) -> int:
        return self.rows * self.cols

    def neighbor(self, router, port) -> np.ndarray:
        """Router across ``port`` (-1 for the local port and for mesh edges)."""
        router = np.asarray(router, dtype=np.int64)
        port = np.asarray(port, dtype=np.int64)
        r = router // self.cols + DROW[port]
        c = router % self.cols + DCOL[port]
        if self.torus:
            out = (r % self.rows) * self.cols + (c % self.cols)
            return np.where(port == LOCAL, -1, out)
        inside = (r >= 0) & (r < self.rows) & (c >= 0) & (c < self.cols) & (port != LOCAL)
        return np.where(inside, r * self.cols + c, -1)

    def step(self, cur, dst, size):
        """Signed direction (+1, -1, 0) to move along one dimension of length ``size``."""
        if not self.torus:
            return np.sign(dst - cur)
        d = (dst - cur) % size
        tie = np.where(cur % 2 == 0, 1, -1)  # a tie occurs only where a dimension's route starts
        return np.where(d == 0, 0, np.where(2 * d < size, 1, np.where(2 * d == size, tie, -1)))

    def route(self, cur, dst) -> np.ndarray:
        """Output port at router ``cur`` for a packet to ``dst`` (by the grid's routing function)."""
        cur = np.asarray(cur, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        return np.asarray(ROUTINGS.get(self.routing)(self, cur, dst)).astype(np.int8)

    def hops(self, src, dst) -> np.ndarray:
        """Links a minimal route traverses."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        dc = np.abs(dst % self.cols - src % self.cols)
        dr = np.abs(dst // self.cols - src // self.cols)
        if self.torus:
            dc = np.minimum(dc, self.cols - dc)
            dr = np.minimum(dr, self.rows - dr)
        return dc + dr

    def dateline_class(self, nxt, src, port) -> np.ndarray:
        """Virtual-channel class (0 or 1) of a flit entering ``nxt`` through ``port``'s link.

        Class 1 once the packet has wrapped around in the dimension it is travelling:
        moving +col it has wrapped iff it is now left of where it started that
        dimension (its source column), and so on. Mesh routes never wrap.
        """
        nxt = np.asarray(nxt, dtype=np.int64)
        src = np.asarray(src, dtype=np.int64)
        port = np.asarray(port, dtype=np.int64)
        nc, sc = nxt % self.cols, src % self.cols
        nr, sr = nxt // self.cols, src // self.cols
        wrapped = np.select(
            [port == EAST, port == WEST, port == SOUTH, port == NORTH],
            [nc < sc, nc > sc, nr < sr, nr > sr],
            default=False,
        )
        return wrapped.astype(np.int64)

    def links(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All directed router-to-router links as (src router, port, dst router)."""
        routers = np.repeat(np.arange(self.n), PORTS - 1)
        ports = np.tile(np.arange(1, PORTS), self.n)
        dst = self.neighbor(routers, ports)
        keep = dst >= 0
        return routers[keep], ports[keep], dst[keep]

    def route_table(self, routers) -> np.ndarray:
        """[len(routers), n] int8 output port of each router towards each destination, so
        routing is one lookup per head flit (a byte each: the table stays in cache); built a
        block of rows at a time to bound memory."""
        routers = np.asarray(routers, dtype=np.int64)
        out = np.empty((len(routers), self.n), dtype=np.int8)
        dst = np.arange(self.n)[None, :]
        step = max(1, (1 << 20) // self.n)
        for i in range(0, len(routers), step):
            out[i:i + step] = self.route(routers[i:i + step, None], dst)
        return out


@dataclass(frozen=True)
class Region:
    """A rectangle of routers owned by one shard: rows [row0, row1), cols [col0, col1)."""

    row0: int
    row1: int
    col0: int
    col1: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.row1 - self.row0, self.col1 - self.col0

    @property
    def size(self) -> int:
        return (self.row1 - self.row0) * (self.col1 - self.col0)

    def routers(self, cols: int) -> np.ndarray:
        """Global router ids in local (row-major within the rectangle) order."""
        r = np.arange(self.row0, self.row1)
        c = np.arange(self.col0, self.col1)
        return (r[:, None] * cols + c[None, :]).ravel()

    def __str__(self) -> str:
        return f"rows {self.row0}..{self.row1 - 1}, cols {self.col0}..{self.col1 - 1}"
