"""Shards beyond the cores share actors (cluster/parallel/groups.py): the same cut, the same
windows and the same run as one actor a shard or one process."""

import pytest

from cluster.jobs.chip import simulate_chip
from cluster.jobs.noc import NocGrid
from cluster.parallel.backends import run_backend
from cluster.parallel.groups import actor_groups
from sim.noc.params import NocParams
from tests.sim.chip.chiprun import config as chip_config

KV = {"workload": {"kind": "kv-decode", "decode": {
    "requests": 3, "max_batch": 2, "layers": 1, "heads": 1,
    "prompt_tokens": {"dist": "uniform", "min": 8, "max": 16},
    "output_tokens": {"dist": "uniform", "min": 2, "max": 3}}}}


def test_groups_are_contiguous_and_as_even_as_can_be():
    assert actor_groups(4, 2) == [[0, 1], [2, 3]]
    assert actor_groups(3, 2) in ([[0, 1], [2]], [[0], [1, 2]])
    assert actor_groups(5, 2) in ([[0, 1], [2, 3, 4]], [[0, 1, 2], [3, 4]])
    assert actor_groups(2, 4) == [[0], [1]] and actor_groups(3, 1) == [[0, 1, 2]]


@pytest.mark.ray
@pytest.mark.parametrize("shards,cut", [(3, "cols"), (4, "blocks")])
def test_shards_beyond_the_cores_run_on_one_actor_a_core_and_simulate_the_same_run(ray_session, shards, cut):
    cfg = chip_config(KV)
    one = simulate_chip(cfg).summary["result_hash"]
    local = simulate_chip(cfg, shards=shards, cut=cut)  # one process, the shards one after another
    on_ray = simulate_chip(cfg, shards=shards, cut=cut, backend="ray")  # 2 cores (ray_session)
    o = on_ray.simulation.outcome
    assert o.figures.actors == 2 and len(set(o.figures.actor_pids)) == 2 and len(o.reports) == shards
    assert on_ray.summary["result_hash"] == local.summary["result_hash"] == one
    assert o.epochs == local.simulation.outcome.epochs  # the windows of the shard count asked for


@pytest.mark.ray
def test_a_noc_cut_into_more_shards_than_cores_counts_every_flit_once(ray_session):
    p = NocParams(rows=6, cols=6, rate=0.2, warmup_cycles=200, measure_cycles=400, drain_cycles=2000)
    job = NocGrid(p)
    regions = job.regions(3, "cols")
    e, _ = job.epoch(regions, None)
    local = run_backend("local", job.model(regions), regions, e)
    ray = run_backend("ray", job.model(regions), regions, e)
    assert ray.figures.actors == 2 and ray.epochs == local.epochs
    for a, b in zip(ray.reports, local.reports, strict=True):  # each shard's own measurements, in shard order
        assert (a.created_flits == b.created_flits).all() and (a.eject_cycle == b.eject_cycle).all()
        assert a.flit_latency_sum == b.flit_latency_sum and a.measured_hops == b.measured_hops
