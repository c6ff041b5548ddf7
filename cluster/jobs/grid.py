"""Cutting a grid (the NoC's routers, a chip's CU/MU tiles) into rectangular shards, and the
lookahead the cuts allow: the regions of the NoC and chip jobs' Decompositions.

Shapes: ``rows`` (horizontal bands), ``cols`` (vertical bands), ``blocks`` (an a x b
arrangement of rectangles with a * b = shards, as square as the grid allows). Sizes
differ by at most one row or column, so shards carry near-equal work.

Conservative lockstep needs every epoch to be no longer than the lookahead: the least
time, over every link the cut separates, between an event on one side and its first
effect on the other (Chandy & Misra 1979; Fujimoto, "Parallel and Distributed
Simulation Systems", ch. 3). Here that is a flit's switch-grant-to-arrival time (the
switch pipeline a flit must still spend in the boundary router, plus the link) and a
credit's return time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cluster.errors import UserError
from cluster.parallel.model import CutFigures
from sim.network import LinkCounts
from sim.noc.params import NocParams
from sim.noc.topology import DIRECTION, Region

CUTS = ("rows", "cols", "blocks")


def _bands(total: int, parts: int) -> list[tuple[int, int]]:
    edges = [round(i * total / parts) for i in range(parts + 1)]
    return [(edges[i], edges[i + 1]) for i in range(parts)]


def _block_shape(rows: int, cols: int, shards: int) -> tuple[int, int] | None:
    """a x b = shards with a <= rows, b <= cols, blocks as square as possible (None: no such a, b)."""
    best = None
    for a in range(1, min(shards, rows) + 1):  # a > rows never fits: run.shards = 10**9 is refused at once
        if shards % a:
            continue
        b = shards // a
        if a > rows or b > cols:
            continue
        aspect = abs(np.log((rows / a) / (cols / b)))
        if best is None or aspect < best[0]:
            best = (aspect, a, b)
    return None if best is None else (best[1], best[2])


def cuts_for(rows: int, cols: int, shards: int) -> list[str]:
    """The cuts that make ``shards`` rectangles of a rows x cols grid."""
    fits = {"rows": shards <= rows, "cols": shards <= cols, "blocks": _block_shape(rows, cols, shards) is not None}
    return [c for c in CUTS if fits[c]]


def _no_cut(rows: int, cols: int, shards: int, cut: str, what: str) -> UserError:
    """The error for a cut that cannot make ``shards`` pieces, with a change that works: another
    cut for the same count, else the nearest counts some cut makes (at most rows x cols, blocks)."""
    others = cuts_for(rows, cols, shards)
    if others:
        hint = " or ".join(f'run.cut = "{c}"' for c in others) + f" makes {shards}"
    else:
        def named(n: int) -> str:
            return f'{n} (run.cut = "{cuts_for(rows, cols, n)[0]}")'

        below = next(n for n in range(min(shards, rows * cols + 1) - 1, 0, -1) if cuts_for(rows, cols, n))
        above = next((n for n in range(shards + 1, rows * cols + 1) if cuts_for(rows, cols, n)), None)
        hint = f"no cut makes {shards} of a {rows}x{cols} grid; " + (
            f"{named(below)} or {named(above)} do" if above else f"at most {named(below)}")
    return UserError(f"cannot cut {what} into {shards} {cut}; {hint}")


def cut_grid(rows: int, cols: int, shards: int, cut: str = "rows") -> list[Region]:
    """Rectangular regions covering the grid, in shard order."""
    if shards < 1:
        raise UserError(f"run.shards must be at least 1, got {shards}")
    if cut not in CUTS:
        raise UserError(f"run.cut {cut!r} is not one of {', '.join(CUTS)}")
    if cut == "rows":
        if shards > rows:
            raise _no_cut(rows, cols, shards, "row bands", f"{rows} rows")
        return [Region(r0, r1, 0, cols) for r0, r1 in _bands(rows, shards)]
    if cut == "cols":
        if shards > cols:
            raise _no_cut(rows, cols, shards, "column bands", f"{cols} columns")
        return [Region(0, rows, c0, c1) for c0, c1 in _bands(cols, shards)]
    shape = _block_shape(rows, cols, shards)
    if shape is None:
        raise _no_cut(rows, cols, shards, "blocks", f"a {rows}x{cols} grid")
    a, b = shape
    return [Region(r0, r1, c0, c1) for r0, r1 in _bands(rows, a) for c0, c1 in _bands(cols, b)]


def owner_map(regions: list[Region], rows: int, cols: int) -> np.ndarray:
    """Shard index owning each router."""
    owner = np.full(rows * cols, -1, dtype=np.int64)
    for i, reg in enumerate(regions):
        owner[reg.routers(cols)] = i
    return owner


@dataclass(frozen=True)
class CutLink:
    src: int
    dst: int
    port: int
    src_shard: int
    dst_shard: int
    lookahead: int

    def describe(self, cols: int) -> str:
        s, d = divmod(self.src, cols), divmod(self.dst, cols)
        return (f"link ({s[0]},{s[1]})->({d[0]},{d[1]}) [{DIRECTION[self.port]}] "
                f"from shard {self.src_shard} to shard {self.dst_shard}")


def cut_links(p: NocParams, regions: list[Region]) -> list[CutLink]:
    """Every directed link whose ends lie in different shards, with its lookahead."""
    grid = p.grid
    owner = owner_map(regions, p.rows, p.cols)
    src, port, dst = grid.links()
    cut = owner[src] != owner[dst]
    # a flit granted the switch at s reaches the far buffer at s + flit_delay; the credit
    # for the buffer it leaves there comes back after credit_return
    la = min(p.flit_delay, p.credit_return)
    return [CutLink(int(a), int(b), int(o), int(owner[a]), int(owner[b]), la)
            for a, o, b in zip(src[cut], port[cut], dst[cut])]


DEFAULT_EPOCH = 1024  # cycles per epoch when nothing is cut (one shard)


def epoch_length(p: NocParams, regions: list[Region], requested: int | None) -> tuple[int, int | None]:
    """(epoch length, lookahead) for these shards; reject an epoch longer than the lookahead."""
    links = cut_links(p, regions)
    if not links:
        return (requested or DEFAULT_EPOCH), None
    tightest = min(links, key=lambda c: c.lookahead)
    la = tightest.lookahead
    if requested is None:
        return la, la
    if requested < 1:
        raise UserError(f"run.epoch must be at least 1 cycle, got {requested}")
    if requested > la:
        raise UserError(
            f"run.epoch = {requested} cycles is longer than the lookahead of "
            f"{tightest.describe(p.cols)}: {la} cycles (switch allocation {p.sw_alloc_delay} + "
            f"traversal {p.st_delay} + link {p.link_latency}; credit return {p.credit_return}). "
            f"Use run.epoch <= {la} or leave it unset."
        )
    return requested, la


def cut_figures(p: NocParams, links: LinkCounts, cycles: int, regions: list[Region]) -> CutFigures:
    """What the flits over a whole grid's links in its first ``cycles`` cycles say of a cut into
    ``regions``: the flits through each region's routers (where the routing and the units' work
    is) and the flits that crossed between regions."""
    owner = owner_map(regions, p.rows, p.cols)
    src = owner[links.router]
    work = np.bincount(src, weights=links.flits, minlength=len(regions))
    crossed = links.flits[src != owner[p.grid.neighbor(links.router, links.port)]]
    return CutFigures(cycles, tuple(float(x) for x in work), float(crossed.sum()))
