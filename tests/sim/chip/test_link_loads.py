"""Per-link flit counts are measured by whichever NoC model ran under whichever routing
function, and equal the counts a dimension-order route implies (an independent walk of each
packet's XY or YX route on the mesh)."""

import numpy as np
import pytest

from sim.network import NETWORKS
from sim.noc.params import NocParams
from sim.noc.topology import EAST, NORTH, SOUTH, WEST, Region


def _walk(cols: int, order: str, src, dst, flits, routers: int) -> np.ndarray:
    """[routers, 5] flits per output port: each packet walked along its first dimension
    ("x": columns) until aligned, then the other, on a mesh."""
    load = np.zeros((routers, 5), dtype=np.int64)
    for s, d, f in zip(src, dst, flits):
        r, c = divmod(int(s), cols)
        dr, dc = divmod(int(d), cols)
        for dim in order:
            while dim == "x" and c != dc:
                load[r * cols + c, EAST if dc > c else WEST] += f
                c += 1 if dc > c else -1
            while dim == "y" and r != dr:
                load[r * cols + c, SOUTH if dr > r else NORTH] += f
                r += 1 if dr > r else -1
    return load


@pytest.mark.parametrize("model", ["cycle", "packet"])
@pytest.mark.parametrize("shards", [1, 2])
@pytest.mark.parametrize("routing", ["xy", "yx"])
def test_link_totals_follow_the_routes(model, shards, routing):
    p = NocParams(rows=4, cols=6, vc_buffers=8, rate=0.0, warmup_cycles=0, measure_cycles=1, drain_cycles=0,
                  routing=routing)
    rng = np.random.default_rng(7)
    n = 60
    src = rng.integers(0, p.nodes, n)
    dst = rng.integers(0, p.nodes, n)
    flits = rng.integers(1, 5, n)
    cycles = np.arange(n) * 3  # one packet per source per cycle at most
    cls = NETWORKS.get(model)
    regions = [Region(0, 2, 0, 6), Region(2, 4, 0, 6)] if shards == 2 else [Region(0, 4, 0, 6)]
    owner = np.zeros(p.nodes, dtype=np.int64)
    for i, reg in enumerate(regions):
        owner[reg.routers(p.cols)] = i
    nets = [cls(p, reg, record_ejections=True, measure=False) for reg in regions]
    for i, net in enumerate(nets):
        mine = owner[src] == i
        net.offer(cycles[mine], src[mine], dst[mine], flits[mine])
    inbound = [cls.boundary() for _ in nets]
    for t in range(0, 2000, 3):  # epochs of the lookahead (flit_delay = 3 cycles)
        outs = [net.advance(t, t + 3, b) for net, b in zip(nets, inbound)]
        routed = [cls.split(o, owner, p, len(nets)) for o in outs]
        inbound = [cls.boundary().join([r[i] for r in routed]) for i in range(len(nets))]
    got = np.zeros((p.nodes, 5), dtype=np.int64)
    for net in nets:
        lc = net.link_totals()
        got[lc.router, lc.port] += lc.flits
    assert (got == _walk(p.cols, routing, src, dst, flits, p.nodes)).all()
