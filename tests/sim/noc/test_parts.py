"""Building blocks against brute force: arbiters, partitions, random numbers, routing."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.errors import UserError
from cluster.jobs.grid import cut_grid, cut_links, epoch_length, owner_map
from sim import rng
from sim.cycles import NEVER
from sim.noc import kernel
from sim.noc.params import NocParams
from sim.noc.topology import Grid
from sim.noc.traffic import creations


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 7)), min_size=1, max_size=40),
       st.lists(st.integers(0, 7), min_size=6, max_size=6))
def test_group_round_robin_matches_brute_force(requests, pointers):
    # each group is an arbiter of size 8 with a pointer; request = (group, requester index);
    # the kernel keys a request by its round-robin position from the pointer, which it
    # stores negated (8 - pointer), and the smallest key of a group wins
    requests = list(dict.fromkeys(requests))  # a requester asks once
    work = np.full((kernel.WORK_ROWS, 8), NEVER, dtype=np.int64)
    listed = 0
    for g, i in requests:
        key = (i + 8 - pointers[g]) % 8
        listed = kernel.claim(work, kernel.KEY_A, kernel.WHO_A, kernel.LIST_A, listed, g, key, i)
    groups = sorted({g for g, _ in requests})
    assert sorted(work[kernel.LIST_A, :listed].tolist()) == groups  # each group listed once
    for g in groups:
        asking = sorted(i for gg, i in requests if gg == g)
        # brute force: first requester at or after the pointer, cyclically
        expected = next(i for i in [(pointers[g] + k) % 8 for k in range(8)] if i in asking)
        assert work[kernel.WHO_A, g] == expected


@pytest.mark.parametrize("rows,cols,shards,cut", [(8, 8, 3, "rows"), (8, 8, 4, "blocks"), (5, 7, 3, "cols"),
                                                  (6, 6, 6, "blocks"), (8, 8, 1, "rows")])
def test_partition_covers_grid_once(rows, cols, shards, cut):
    regions = cut_grid(rows, cols, shards, cut)
    owner = owner_map(regions, rows, cols)
    assert len(regions) == shards and (owner >= 0).all()
    assert sorted(r.size for r in regions) == sorted(np.bincount(owner).tolist())
    sizes = [r.size for r in regions]
    assert max(sizes) - min(sizes) <= max(rows, cols)  # balanced to a row or column


def test_lookahead_and_cut_links():
    p = NocParams(rows=4, cols=4)
    regions = cut_grid(4, 4, 2, "rows")
    links = cut_links(p, regions)
    assert len(links) == 8  # 4 columns x 2 directions across the cut
    assert epoch_length(p, regions, None) == (3, 3)
    slow = p.with_(link_latency=5)
    assert epoch_length(slow, regions, None)[1] == 7  # sa 1 + st 1 + link 5
    with pytest.raises(UserError, match=r"link \(1,0\)->\(2,0\)"):
        epoch_length(p, regions, 4)
    torus = p.with_(topology="torus")
    assert len(cut_links(torus, regions)) == 16  # the wrap-around links are cut too


def test_counter_rng_is_uniform_and_keyed():
    u = rng.uniform(7, rng.STREAM_INJECT, np.arange(64)[:, None], np.arange(20000)[None, :])
    assert abs(u.mean() - 0.5) < 0.002 and abs(u.var() - 1 / 12) < 0.001
    assert np.array_equal(u[3, 100:200], rng.uniform(7, rng.STREAM_INJECT, 3, np.arange(100, 200)))
    assert not np.array_equal(u[3], u[4])
    counts = np.bincount(rng.below(1, rng.STREAM_DEST, np.arange(64), 5, 64).ravel(), minlength=64)
    assert counts.sum() == 64


@pytest.mark.parametrize("seed, rate, nodes", [(1, 0.075, np.arange(1024)), (9, 0.9, np.arange(5, 40, 3)),
                                               (2**63 + 5, 0.01, np.array([7]))])
def test_compiled_injection_draws_are_the_counter_rngs(seed, rate, nodes):
    """The creations drawn in compiled code are those of rng.uniform keyed by (node, cycle)."""
    p = NocParams(rows=32, cols=32, rate=rate, seed=seed)
    cycles = np.arange(4096, 4096 + 300)
    u = rng.uniform(seed, rng.STREAM_INJECT, nodes[None, :], cycles[:, None])
    ci, ni = np.nonzero(u < p.packet_rate)
    cyc, src, dst = creations(p, nodes, int(cycles[0]), int(cycles[-1]) + 1)
    assert len(ci) > 0
    assert np.array_equal(cyc, cycles[ci]) and np.array_equal(src, nodes[ni])
    assert np.array_equal(dst, rng.below(seed, rng.STREAM_DEST, src, cyc, p.nodes))


@settings(max_examples=50)
@given(st.integers(1, 7), st.integers(1, 7), st.booleans(), st.data())
def test_xy_routes_are_minimal_and_reach_the_destination(rows, cols, torus, data):
    if rows * cols < 2:
        return
    g = Grid(rows, cols, torus)
    src = data.draw(st.integers(0, g.n - 1))
    dst = data.draw(st.integers(0, g.n - 1))
    cur, steps, turned = src, 0, False
    while cur != dst:
        port = int(g.route(cur, dst))
        assert port != 0
        if port in (3, 4):
            turned = True
        assert not (turned and port in (1, 2))  # columns first, then rows
        cur = int(g.neighbor(cur, port))
        steps += 1
        assert steps <= rows + cols
    assert steps == int(g.hops(src, dst))
