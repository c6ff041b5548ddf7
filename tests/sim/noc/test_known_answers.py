"""The NoC against known answers: closed forms and BookSim2's published curve.

Reference figures are from docs/references.md, "NoC" (BookSim2, "config B"),
copied here so the tests run from a fresh clone.
"""

import numpy as np
import pytest

from cluster.jobs.noc import simulate_noc
from sim.noc.params import NocParams
from sim.noc.shard import NocShard
from sim.noc.topology import Grid, Region

# BookSim2, 8x8 mesh, uniform random incl. self, config B: offered -> avg packet latency
BOOKSIM_8X8 = {0.005: 26.92, 0.05: 27.03, 0.10: 27.21, 0.20: 27.85, 0.30: 29.34, 0.35: 31.29}
# exact P(H = h), h = 0..14, for XY routes on an 8x8 mesh with uniform destinations incl. self
HOPS_8X8 = [.01562, .05469, .09473, .12109, .13477, .13672, .12793, .10938, .08203, .05469,
            .03418, .01953, .00977, .00391, .00098]


def _all_pairs_latency(p: NocParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Send one packet per (source, destination) pair, each alone in the network."""
    n = p.nodes
    src = np.repeat(np.arange(n), n)
    dst = np.tile(np.arange(n), n)
    spacing = 4 * (p.rows + p.cols) + p.packet_flits + 8  # longer than any zero-load latency
    cycles = np.arange(n * n) * spacing
    shard = NocShard(p, Region(0, p.rows, 0, p.cols))
    shard.offer(cycles, src, dst)
    shard.advance(0, int(cycles[-1]) + spacing)
    r = shard.report()
    assert len(r.eject_pkt) == n * n
    order = np.argsort(r.eject_pkt)
    pkt, eject = r.eject_pkt[order], r.eject_cycle[order]
    # packet id = creation cycle * n + source; creation cycles are increasing in pair order
    assert np.array_equal(pkt // n, cycles) and np.array_equal(pkt % n, src)
    return src, dst, eject - cycles


@pytest.mark.parametrize("k,topology,flits",
                         [(4, "mesh", 1), (8, "mesh", 1), (4, "mesh", 4), (4, "torus", 1), (5, "torus", 2)])
def test_zero_load_latency_equals_formula_for_every_pair(k, topology, flits):
    p = NocParams(rows=k, cols=k, topology=topology, rate=0.0, packet_flits=flits,
                  warmup_cycles=0, measure_cycles=10**7, drain_cycles=0)
    src, dst, latency = _all_pairs_latency(p)
    hops = Grid(k, k, topology == "torus").hops(src, dst)
    # T0 = 4 (H + 1) + 2 + (L - 1) for config B (docs/references.md, "NoC")
    assert np.array_equal(latency, 4 * (hops + 1) + 2 + (flits - 1))


def test_low_load_hop_histogram_and_latency_are_known_answers():
    p = NocParams(rows=8, cols=8, rate=0.005, warmup_cycles=500, measure_cycles=10000)
    done = simulate_noc(p)
    s, out = done.summary, done.simulation.outcome
    from sim.noc.summary import packet_records

    rec = packet_records(p, out.reports)
    hops = Grid(8, 8).hops(rec.src, rec.dst)
    hist = np.bincount(hops, minlength=15)[:15] / len(hops)
    assert len(hops) > 2500
    assert 0.5 * np.abs(hist - HOPS_8X8).sum() < 0.03  # total variation distance
    assert s["avg_hops"] == pytest.approx(5.25, abs=0.1)  # 2 (k^2 - 1) / (3k)
    # links actually traversed by the head flits equal the minimal XY hop count
    assert s["avg_hops"] == pytest.approx(hops.mean(), abs=1e-9)
    # near zero load a packet's latency is T0(H) = 4 (H + 1) + 2 unless it met contention,
    # which only ever delays it; so the latency histogram is the hop histogram shifted
    lat = rec.latency
    assert (lat >= 4 * (hops + 1) + 2).all()
    assert (lat == 4 * (hops + 1) + 2).mean() > 0.97


def test_uniform_8x8_curve_matches_booksim_within_5_percent():
    for rate, ref in BOOKSIM_8X8.items():
        s = simulate_noc(NocParams(rate=rate, warmup_cycles=2000, measure_cycles=3000)).summary
        assert not s["saturated"]
        assert s["avg_latency"] == pytest.approx(ref, rel=0.05), rate
        assert s["accepted"] == pytest.approx(rate, rel=0.05), rate
        assert s["littles_law_error"] < 0.02


def test_uniform_8x8_saturates_between_037_and_045():
    below = simulate_noc(NocParams(rate=0.37, warmup_cycles=2000, measure_cycles=3000)).summary
    above = simulate_noc(NocParams(rate=0.50, warmup_cycles=2000, measure_cycles=3000, drain_cycles=1000)).summary
    assert not below["saturated"]
    assert above["saturated"]
    # beyond saturation the network delivers its saturation throughput, not the offered load
    assert 0.37 <= above["accepted"] <= 0.45


@pytest.mark.parametrize("traffic,bound", [("transpose", 1 / 7), ("bitcomp", 0.25)])
def test_permutations_saturate_below_channel_load_bound(traffic, bound):
    # the bound is the offered load at which the busiest channel is fully used; past it
    # the flows through that channel cannot be carried (other flows, e.g. transpose's
    # diagonal nodes that send to themselves, still are, so the average accepted load
    # can exceed the bound: the test is on the offered load that saturates)
    over = simulate_noc(NocParams(traffic=traffic, rate=1.05 * bound, warmup_cycles=1000,
                                 measure_cycles=3000, drain_cycles=500)).summary
    under = simulate_noc(NocParams(traffic=traffic, rate=0.7 * bound, warmup_cycles=1000, measure_cycles=2000)).summary
    assert over["saturated"] and over["max_source_backlog"] > 50
    assert not under["saturated"]


def test_link_utilisation_equals_closed_form_channel_load():
    k, rate = 8, 0.2
    p = NocParams(rows=k, cols=k, rate=rate, warmup_cycles=1000, measure_cycles=8000)
    links = simulate_noc(p).tables["links"]
    # XY routing, uniform incl. self: the link between positions i and i+1 of a row or
    # column carries rate * (i + 1) (k - i - 1) / k flits/cycle in each direction
    src, dst = links["src_router"], links["dst_router"]
    horizontal = (src // k) == (dst // k)
    pos = np.where(horizontal, np.minimum(src % k, dst % k), np.minimum(src // k, dst // k))
    expected = rate * (pos + 1) * (k - pos - 1) / k
    assert np.abs(links["utilization"] - expected).max() < 0.02
    assert abs(links["utilization"].mean() - expected.mean()) < 0.003


def test_torus_carries_heavy_traffic_without_deadlock():
    # a torus needs its dateline VC classes: without them dimension-order routing on
    # rings can deadlock at high load, and nothing would drain
    s = simulate_noc(NocParams(rows=6, cols=6, topology="torus", rate=0.6, warmup_cycles=500,
                              measure_cycles=1500, drain_cycles=3000)).summary
    assert s["accepted"] > 0.4  # channel-load bound for uniform on a 6x6 torus is 8/6


def test_multi_flit_packets_conserve_flits_and_obey_littles_law():
    s = simulate_noc(NocParams(rate=0.25, packet_flits=4, warmup_cycles=1000, measure_cycles=3000)).summary
    assert not s["saturated"]
    assert s["accepted"] == pytest.approx(0.25, rel=0.05)
    assert s["littles_law_error"] < 0.03
