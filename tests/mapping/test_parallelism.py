"""Degrees of parallelism: divisors, free dimensions, pipeline factor, time multiplier."""

import math

import pytest

from mapping.generators import llm_workload
from mapping.parallelism import candidates, divisors, network_sizes, pipeline_factor
from mapping.systems import A100, GB, LinkKind, NetworkDim, Parallelism, System


def _ring(size, parallelism):
    return NetworkDim(LinkKind.RING, size, GB, parallelism)

def test_pipeline_factor_by_hand():
    # Megatron-145B: PP 8, 96 micro-batches, 10 layers per stage -> bubble spread over 9 boundaries
    assert pipeline_factor(8, 96, 10) == pytest.approx(1 + 7 / (96 * 9))
    assert pipeline_factor(128, 3072, 1) == pytest.approx(1 + 127 / 3072)  # one layer per stage: c = 1
    assert pipeline_factor(2, 1536, 2) == pytest.approx(1 + 1 / 1536)
    assert pipeline_factor(1, 5, 3) == 1.0


def test_divisors_and_free_dimensions():
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    sys = System(16, A100, (_ring(0, Parallelism.TP), _ring(0, Parallelism.DP)))
    assert sorted(network_sizes(sys, 16)) == [(1, 16), (2, 8), (4, 4), (8, 2), (16, 1)]
    fixed = System(16, A100, (_ring(4, Parallelism.TP), _ring(0, Parallelism.DP)))
    assert network_sizes(fixed, 16) == [(4, 4)]


def test_candidate_multiplier_and_p2p():
    w = llm_workload(1024, 8, 64, layers=16, global_batch=32, micro_batch=2, training=True, tile_size=8)
    sys = System(16, A100, (NetworkDim(LinkKind.RING, 2, 100 * GB, Parallelism.TP),
                            NetworkDim(LinkKind.RING, 4, 10 * GB, Parallelism.PP),
                            NetworkDim(LinkKind.RING, 2, 10 * GB, Parallelism.DP)))
    (c,), skipped = candidates(w, sys)
    assert (c.tp, c.pp, c.dp, c.layers_per_stage, c.num_micro_batches, c.num_tiles) == (2, 4, 2, 4, 8, 8)
    pf = 1 + 3 / (8 * 3)
    assert c.multiplier == pytest.approx(pf * 4 * 32 / 2)
    assert c.p2p_seconds == pytest.approx(2 * 1024 * 64 * 2 * 16 / (10 * GB))


def test_enumeration_covers_free_sizes_micro_batches_and_tiles():
    w = llm_workload(256, 4, 8, layers=4, global_batch=8, micro_batch=None, tile_size=None)
    sys = System(8, A100, (_ring(0, Parallelism.TP), _ring(0, Parallelism.PP)))
    cands, skipped = candidates(w, sys)
    pps = {c.pp for c in cands}
    assert pps == {1, 2, 4}  # PP 8 > 4 layers is skipped with a reason
    assert any("PP=8" in s for s in skipped)
    assert {c.tile_size for c in cands} == {1, 2, 4, 8}
    assert {c.micro_batch for c in cands} == {1, 2, 4, 8}
    assert all(math.isclose(c.num_micro_batches * c.micro_batch * c.dp, 8) for c in cands)
