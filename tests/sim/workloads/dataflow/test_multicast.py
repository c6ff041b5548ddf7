"""Multicast reads: a tile every CU of a kernel reads whole, read once from its MU and relayed
down a tree over the kernel's CUs (compile.multicast_trees), against brute force and counts."""

import dataclasses
import math

import pytest

from cluster.jobs.chip import simulate_chip
from mapping.placement import place_on_grid
from sim.workloads.dataflow import DataflowParams, plan_addresses
from sim.workloads.dataflow.compile import multicast_trees
from tests.sim.chip.chiprun import config
from tests.sim.workloads.dataflow.harness import EW, GW, Kernel, chain, plan_of


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100, 554])
def test_every_cu_receives_each_stripe_once_from_a_tree_of_depth_log2_n(n):
    """Each stripe's tree spans the CUs: one root reads the MU, every other CU has one parent
    that lists it as a child (so it receives the stripe exactly once), no CU relays to more
    than two, and the depth is floor(log2 n) (halving: the largest subtree of n nodes has
    n // 2 of them)."""
    cus = tuple(range(3, 3 + 2 * n, 2))  # tiles of a 52-column grid, every other one
    stripes = 7
    trees = multicast_trees(cus, stripes, 52)
    assert len(trees) == stripes
    roots = set()
    for tree in trees:
        assert set(tree) == set(cus)
        [root] = [c for c, (parent, _) in tree.items() if parent < 0]
        roots.add(root)
        received = [k for _, kids in tree.values() for k in kids]
        assert sorted(received) == sorted(set(cus) - {root})  # once each, the root never
        assert all(tree[k][0] == c for c, (_, kids) in tree.items() for k in kids)
        assert max(len(kids) for _, kids in tree.values()) <= 2

        def depth(c: int, tree: dict = tree) -> int:
            return 0 if tree[c][0] < 0 else 1 + depth(tree[c][0], tree)

        assert max(depth(c) for c in cus) == int(math.log2(n))
    assert len(roots) == min(n, stripes)  # the stripes' reads start at different CUs


def _run(multicast: bool):
    """An elementwise kernel feeding a weight GEMM whose CUs all read its output tile whole."""
    plan = plan_of(chain([Kernel("a", EW, 2048, 1, 64), Kernel("b", GW, 2048, 2048, 64)]), 64, 16, partitions=1)
    cfg = config({"chip": {"preset": "plasticine"}})
    placement = plan_addresses(place_on_grid(plan, cfg.spec, 0, cfg.policy.room(cfg.mu)), cfg.spec.mu_bytes)
    params = DataflowParams.from_plan(plan, placement, cfg.spec, multicast=multicast)
    return params, simulate_chip(dataclasses.replace(cfg, workload=params))


def test_a_multicast_tile_is_read_once_a_stripe_and_relayed_to_every_other_cu():
    """With multicast the MU serves each stripe of the tile once a tile instead of once per
    reading CU (n - 1 fewer reads a stripe a tile), each other CU gets it as one relayed write
    (n - 1 more writes), and every CU still receives the same bytes."""
    params, unicast = _run(False)
    mparams, multicast = _run(True)
    part = params.partitions[0]
    [b] = [b for b, buf in enumerate(part.buffers) if buf.kind == "tiles"]
    readers = [s for s in part.slots if s.kernel == "b"]
    n, stripes, tiles = len(readers), len(part.buffers[b].stripes), part.tiles
    assert n > 2 and stripes > 1 and tiles > 1
    relayed = (n - 1) * stripes * tiles
    u, mc = unicast.summary["messages"], multicast.summary["messages"]
    assert mc["read_request"] == u["read_request"] - relayed
    assert mc["read_response"] == u["read_response"] - relayed
    assert mc["write"] == u["write"] + relayed
    assert multicast.summary["completed"] and unicast.summary["completed"]
    assert multicast.tables["kernels"]["bytes_in"] == unicast.tables["kernels"]["bytes_in"]
    # the roots read what the tree delivers: each stripe's bytes once a tile
    roots = [r for s in mparams.partitions[0].slots for r in s.reads if r.buffer == b and r.parent < 0]
    assert sorted(r.stripe for r in roots) == list(range(stripes))
    assert sum(r.nbytes for r in roots) == sum(st.tile_bytes for st in part.buffers[b].stripes)
