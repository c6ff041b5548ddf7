"""Shard actors kept warm between runs of one driver (cluster/parallel/ray_actors.py, warm_shards)."""

import time

import pytest

from cluster.config import load
from cluster.config.run import RUN_SCHEMA, system_config
from cluster.jobs.system import simulate_system

RING = {"system": {"chips": 4, "chip": "SN30", "network": [
    {"kind": "r", "size": 4, "link_bandwidth": "64GB/s", "link_latency": "500ns", "parallelism": "TP"}]},
    "workload": {"kind": "collective", "collective": {"op": "all_reduce", "nbytes": 1 << 16}}}


@pytest.mark.ray
def test_runs_in_a_warm_block_reuse_their_actors_and_simulate_the_same_run(ray_session):
    from cluster.parallel.ray_actors import warm_shards

    cfg = system_config(load(RUN_SCHEMA, raw=RING))
    one = simulate_system(cfg).summary["result_hash"]
    with warm_shards():
        runs = [simulate_system(cfg, shards=n, backend="ray") for n in (2, 2)]
        with warm_shards():  # an inner block shares the outer one's actors (its own would wait for CPUs)
            runs.append(simulate_system(cfg, shards=2, backend="ray"))
        runs.append(simulate_system(cfg, shards=3, backend="ray"))  # 3 shards on 2 cores: the same 2 actors
        runs.append(simulate_system(cfg, shards=1, backend="ray"))  # another shape: 1 actor
        pids = [r.simulation.outcome.figures.actor_pids for r in runs]
        assert {r.summary["result_hash"] for r in runs} == {one}
        assert pids[0] == pids[1] == pids[2] == pids[3] and len(pids[0]) == 2  # the same processes, run after run
        assert len(pids[4]) == 1 and not set(pids[4]) & set(pids[0])  # another shape: a new actor
        assert ray_session.available_resources().get("CPU", 0) < 2  # the warm actor holds its CPU
    deadline = time.monotonic() + 30
    while ray_session.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)  # killed actors give their CPUs back asynchronously
    assert ray_session.available_resources().get("CPU", 0) == 2  # they ended with the block
    # outside a block every run has actors of its own
    cold = [simulate_system(cfg, shards=2, backend="ray").simulation.outcome.figures.actor_pids for _ in range(2)]
    assert not set(cold[0]) & set(cold[1])


@pytest.mark.ray
def test_actors_started_before_the_pilot_are_the_ones_the_run_takes(ray_session):
    from cluster.parallel.ray_actors import _WARM, hosts_started

    cfg = system_config(load(RUN_SCHEMA, raw=RING))
    one = simulate_system(cfg).summary["result_hash"]
    with hosts_started(2, None, ("cluster.jobs.system",)):
        pool = _WARM.get()
        assert pool is not None and len(pool) == 1
        (shape, hosts), = pool.items()
        run = simulate_system(cfg, shards=2, backend="ray")
        assert pool[shape] is hosts and len(hosts) == 2  # the run took them: none started anew
        assert run.summary["result_hash"] == one
    # the modules are imported as the actors start: one that cannot be fails them, named
    with pytest.raises(Exception, match="no_such_module"):
        with hosts_started(2, None, ("no_such_module",)):
            simulate_system(cfg, shards=2, backend="ray")
