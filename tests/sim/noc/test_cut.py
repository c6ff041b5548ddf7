"""A shard's earliest output (sim/noc/cut.py): a lower bound on when anything it holds
reaches another shard, tight up to the pipeline stages it leaves out, and the windows it
buys (cluster/parallel/epochs.py)."""

import numpy as np
import pytest

from cluster.jobs.grid import cut_grid, epoch_length, owner_map
from sim.noc.params import NocParams
from sim.noc.shard import NocShard
from sim.packetnoc.shard import PacketShard


def _lone_packet(cls, dst):
    """Shard 0 of an 8x8 mesh cut into two row bands, holding one packet offered at cycle
    100 by router (0, 0): (its earliest output before advancing, the cycle its head really
    reaches shard 1, params)."""
    p = NocParams(rows=8, cols=8, rate=0.0)
    regions = cut_grid(8, 8, 2, "rows")
    s = cls(p, regions[0])
    s.watch_cut(owner_map(regions, 8, 8))
    s.offer(np.array([100]), np.array([0]), np.array([dst]))
    bound = s.earliest_output()
    e, _ = epoch_length(p, regions, None)
    t, arrived = 0, float("inf")
    while t < 400 and arrived == float("inf"):
        arrived = s.advance(t, t + e).earliest()
        t += e
    return bound, arrived, p


def test_a_lone_flit_bound_by_its_hops_to_the_cut():
    bound, arrived, p = _lone_packet(NocShard, 7 * 8)  # to (7, 0): enters shard 1 after 4 hops
    assert bound[0] == np.inf
    # the bound: injection, then every hop at a body flit's least delay (switch + traversal + link)
    assert bound[1] == 100 + p.inject_delay + 4 * p.flit_delay
    # zero-load: a head also spends routing and VC allocation at each hop (NocParams' closed form)
    assert arrived == 100 + p.inject_delay + 4 * (p.routing_delay + p.vc_alloc_delay + p.flit_delay)


def test_a_lone_packet_bound_is_exact_at_zero_load():
    # the packet model's hop is the whole router pipeline, so an unhindered packet meets its
    # bound: what crosses is the head's bid at its fifth router, after routing and VC
    # allocation at all five and four switch-to-link traversals
    bound, arrived, p = _lone_packet(PacketShard, 7 * 8)
    assert bound[0] == np.inf
    assert bound[1] == arrived == 100 + p.inject_delay + 5 * (p.routing_delay + p.vc_alloc_delay) + 4 * p.flit_delay


@pytest.mark.parametrize("cls", [NocShard, PacketShard])
def test_traffic_that_stays_home_never_bounds_a_window(cls):
    bound, arrived, _ = _lone_packet(cls, 3 * 8 + 5)  # (3, 5): inside shard 0
    assert (bound == np.inf).all() and arrived == np.inf


def test_windows_grow_where_traffic_keeps_off_the_cut():
    from cluster.jobs.noc import simulate_noc

    # light uniform traffic: most of the time nothing is within a few hops of the cut
    p = NocParams(rows=8, cols=8, rate=0.0005, warmup_cycles=300, measure_cycles=3000, drain_cycles=2000)
    ref = simulate_noc(p).summary
    done = simulate_noc(p, shards=2)
    s, o = done.summary, done.simulation.outcome
    assert s["result_hash"] == ref["result_hash"]
    e, la = epoch_length(p, cut_grid(8, 8, 2, "rows"), None)
    assert s["measured_packets"] > 50
    assert o.figures.window_mean > 3 * la and o.figures.window_median >= la
