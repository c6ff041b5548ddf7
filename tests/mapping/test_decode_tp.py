"""Decode over a TP group: each chip reads the KV cache of its share of the heads, so the
mapper's memory term scales as 1/TP."""

import pytest

from mapping.generators.decode import decode_workload
from mapping.interchip import choose_splits
from mapping.kernel_costs import ExecutionModel, partition_problem
from mapping.parallelism import candidates
from mapping.solver import map_workload
from mapping.systems import SN40L, LinkKind, NetworkDim, Parallelism, System

# examples/system_decode_tp.toml's decode step: hidden 512, 8 heads, 1,024 cached tokens, batch 8
HIDDEN, HEADS, CONTEXT, BATCH, WORD = 512, 8, 1024, 8, 2
# keys and values of every sequence read once (2 x 8 x 1024 x 512 x 2 B), the new key and value
# written once (2 x 8 x 512 x 2 B): 16,793,600 B on one chip
KV_BYTES = 2 * BATCH * CONTEXT * HIDDEN * WORD + 2 * BATCH * HIDDEN * WORD


def _workload():
    return decode_workload(HIDDEN, HEADS, context=CONTEXT, batch=BATCH, layers=1, word=WORD, tile_size=2)


def _system(tp: int) -> System:
    return System(tp, SN40L, (NetworkDim(LinkKind.RING, tp, 100e9, Parallelism.TP),))


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_the_kv_cache_memory_term_is_split_over_the_tp_group(tp):
    w = _workload()
    splits = choose_splits(w.graph)
    cand = next(c for c in candidates(w, _system(tp))[0] if c.tp == tp)
    problem, _ = partition_problem(w, _system(tp), cand, splits, ExecutionModel())
    assert KV_BYTES == 16_793_600
    assert problem.kernel_memory.sum() == pytest.approx(KV_BYTES / tp / SN40L.dram_bandwidth, rel=1e-12)


def test_the_plan_gives_each_chip_its_share_of_the_cache():
    one = map_workload(_workload(), _system(1), time_limit=20)
    two = map_workload(_workload(), _system(2), time_limit=20)
    assert one.tp == 1 and two.tp == 2
    assert sum(k.extra_dram_bytes for k in one.kernels) == pytest.approx(KV_BYTES)
    assert sum(k.extra_dram_bytes for k in two.kernels) == pytest.approx(KV_BYTES / 2)
    mem = [sum(p.memory_seconds for p in plan.partitions) for plan in (one, two)]
    assert mem[0] == pytest.approx(1.0933e-05, rel=1e-4) and mem[1] == pytest.approx(mem[0] / 2, rel=1e-9)
