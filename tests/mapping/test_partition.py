"""Partition problem: evaluation by hand, MILP = exhaustive enumeration on tiny graphs,
binding capacities, and infeasible inputs named by the failing constraint."""

import itertools

import numpy as np
import pytest

from mapping.heuristics import contiguous, heuristic
from mapping.intrachip import solve_partitions
from mapping.partition import PartitionProblem, evaluate
from mapping.solver import diagnose


def make(n, edges, C, rng=None, **kw):
    rng = rng or np.random.default_rng(0)
    m = len(edges)
    base = dict(
        names=tuple(f"k{i}" for i in range(n)), edges=np.array(edges, dtype=np.int64).reshape(-1, 2),
        backward=np.zeros(n, bool), compute=rng.uniform(1, 10, n), core_options=None,
        network=rng.uniform(0, 4, (n, 1)), kernel_memory=rng.uniform(0, 2, n),
        weight_sram=rng.choice([0.0, 30.0, 60.0], n), spill=rng.uniform(0.5, 6, m),
        onchip_sram=rng.uniform(1, 20, m), spill_sram=rng.uniform(1, 10, m), edge_dram=rng.uniform(1, 50, m),
        dram_fixed=10.0, sram_capacity=100.0, dram_capacity=1e9, cores=8, partitions=C,
    )
    base.update(kw)
    return PartitionProblem(**base)


def brute_force(p):
    best = np.inf
    for a in itertools.product(range(p.partitions), repeat=p.n):
        ev = evaluate(p, np.array(a))
        if ev.feasible:
            best = min(best, ev.total)
    return best


def test_evaluation_by_hand():
    # k0 -> k1, both in partition 0 (on chip) vs split (spill both sides)
    p = make(2, [(0, 1)], 2, compute=np.array([3.0, 4.0]), network=np.array([[1.0], [0.0]]),
             kernel_memory=np.zeros(2), weight_sram=np.array([10.0, 0.0]), spill=np.array([5.0]),
             onchip_sram=np.array([7.0]), spill_sram=np.array([2.0]), edge_dram=np.array([30.0]))
    together = evaluate(p, [0, 0])
    assert together.total == 7.0 and together.sram[0] == 7.0 + 10.0  # compute 3 + 4 dominates
    apart = evaluate(p, [0, 1])
    assert list(apart.time) == [5.0, 5.0]  # spill time on both sides beats compute 3 and 4
    assert list(apart.sram) == [0.0, 2.0]  # k0 alone streams its weight and output (tiling factor)
    assert apart.dram_peak == 10.0 + 30.0
    no_overlap = make(2, [(0, 1)], 2, compute=np.array([3.0, 4.0]), network=np.array([[1.0], [0.0]]),
                      kernel_memory=np.zeros(2), spill=np.array([5.0]), overlap=False)
    assert list(evaluate(no_overlap, [0, 1]).time) == [3 + 5 + 1, 4 + 5]


@pytest.mark.parametrize("seed", range(12))
def test_milp_matches_exhaustive_enumeration(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 7))
    edges = [(i, j) for j in range(1, n) for i in range(j) if rng.random() < 0.45]
    C = int(rng.integers(2, 4)) if n <= 5 else 2
    kw = dict(overlap=bool(seed % 2), stream_weights=seed % 3 != 0)
    if seed % 4 == 1:
        kw["dram_capacity"] = 10.0 + float(rng.uniform(40, 90))  # liveness can bind
    if seed % 5 == 2:
        kw["network"] = rng.uniform(0, 4, (n, 2))  # two channels (HPL style): pays the max
    p = make(n, edges, C, rng, **kw)
    expected = brute_force(p)
    got = solve_partitions(p, time_limit=20, gap=1e-9)
    if not np.isfinite(expected):
        assert got.status == "infeasible"
        return
    assert got.objective == pytest.approx(expected, rel=1e-6)
    assert evaluate(p, got.assignment).total == pytest.approx(expected, rel=1e-6)
    h = heuristic(p)
    if h is not None:
        assert h.feasible and h.total >= expected * (1 - 1e-9)


def test_sram_capacity_binds_exactly_at_the_threshold():
    # three chained kernels with 40-byte weights: they share a partition only if SRAM >= 120 + buffers
    kw = dict(compute=np.ones(3), network=np.zeros((3, 1)), kernel_memory=np.zeros(3),
              weight_sram=np.full(3, 40.0), spill=np.full(2, 5.0), onchip_sram=np.full(2, 1.0),
              spill_sram=np.full(2, 1.0), stream_weights=False)
    roomy = make(3, [(0, 1), (1, 2)], 3, sram_capacity=122.0, **kw)
    assert solve_partitions(roomy).objective == pytest.approx(3.0)  # one partition, no spills
    tight = make(3, [(0, 1), (1, 2)], 3, sram_capacity=121.9, **kw)
    res = solve_partitions(tight)
    assert res.objective == pytest.approx(brute_force(tight)) == pytest.approx(5 + 5)  # {0,1},{2}: max(2,5)+max(1,5)
    assert max(evaluate(tight, res.assignment).sram) <= 121.9


def test_weights_that_fit_nowhere_are_named():
    p = make(3, [(0, 1), (1, 2)], 3, weight_sram=np.array([0.0, 500.0, 0.0]), stream_weights=False)
    assert solve_partitions(p).status == "infeasible"
    reason = diagnose(p)
    assert "SRAM capacity" in reason and "k1" in reason


def test_elastic_names_the_partition_that_overflows():
    # two kernels whose weights (60 each) must share the only partition of 100 bytes
    p = make(2, [(0, 1)], 1, weight_sram=np.array([60.0, 60.0]), stream_weights=False)
    assert "SRAM capacity of partition 0" in diagnose(p)


def test_dram_capacity_infeasible_is_named():
    p = make(3, [(0, 1)], 2, dram_fixed=5e9, dram_capacity=1e9)
    assert "DRAM capacity" in diagnose(p)


def test_contiguous_dp_is_optimal_among_contiguous_cuts():
    rng = np.random.default_rng(7)
    p = make(6, [(i, i + 1) for i in range(5)], 3, rng, sram_capacity=150.0)
    a = contiguous(p)
    best = min(evaluate(p, np.repeat(np.arange(3), sizes)).total
               for sizes in itertools.product(range(7), repeat=3) if sum(sizes) == 6
               if evaluate(p, np.repeat(np.arange(3), sizes)).feasible)
    assert evaluate(p, a).total == pytest.approx(best)
