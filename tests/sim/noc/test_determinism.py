"""Any shard count, cut shape and backend gives bit-identical results (docs/design.md, "Parallel simulation rules")."""

import dataclasses

import numpy as np
import pytest

from cluster.jobs.noc import simulate_noc
from sim.noc import kernel
from sim.noc.params import NocParams
from sim.noc.shard import NocShard
from sim.noc.topology import Region

BASE = dict(rows=8, cols=8, warmup_cycles=300, measure_cycles=700, drain_cycles=2000)
CASES = [
    NocParams(rate=0.3, **BASE),
    NocParams(rate=0.2, packet_flits=3, traffic="hotspot", **BASE),
    NocParams(rate=0.5, topology="torus", **BASE),
]
CASE_IDS = ["uniform", "hotspot-3flit", "torus"]


def _hash(p, **kw):
    done = simulate_noc(p, **kw)
    s, o = done.summary, done.simulation.outcome
    return s["result_hash"], s, o


@pytest.mark.parametrize("params", CASES, ids=CASE_IDS)
def test_result_hash_identical_for_every_shard_count_and_cut(params):
    ref, s1, o1 = _hash(params)
    assert s1["measured_packets"] > 1000
    for cut in ("rows", "cols", "blocks"):
        for shards in (2, 3, 4):
            h, s, o = _hash(params, shards=shards, cut=cut)
            assert h == ref, (cut, shards)
            assert s["sim_cycles"] == s1["sim_cycles"]
            assert s["accepted"] == s1["accepted"] and s["avg_latency"] == s1["avg_latency"]
            assert o.epochs > o1.epochs  # sharded runs really exchanged epochs


def test_shorter_epochs_and_different_seeds():
    p = NocParams(rate=0.3, **BASE)
    ref, _, _ = _hash(p, shards=2)
    assert _hash(p, shards=2, epoch=1)[0] == ref  # any epoch <= lookahead
    assert _hash(p.with_(seed=2), shards=2)[0] != ref  # the seed matters


def test_skip_ahead_crosses_idle_stretches_in_one_epoch():
    # almost no traffic: epochs jump from event to event instead of stepping 3 cycles
    p = NocParams(rate=0.0001, rows=8, cols=8, warmup_cycles=300, measure_cycles=5000)
    ref, s, o = _hash(p)
    h, _, o2 = _hash(p, shards=4, cut="blocks")
    assert h == ref and s["measured_packets"] > 20
    # without skip-ahead: sim_cycles / lookahead (3) epochs; an isolated packet needs ~10
    assert o2.epochs < s["sim_cycles"] / 3 / 3


@pytest.mark.ray
def test_ray_backend_matches_local(ray_session):
    p = NocParams(rate=0.3, **BASE)
    ref, s, _ = _hash(p, shards=2)
    h, s2, o = _hash(p, shards=2, backend="ray")
    assert h == ref and s2 == s
    assert o.figures.chaining == "direct"  # actors exchange epochs among themselves
    h3, _, _ = _hash(p, shards=3, cut="cols", backend="ray")
    h4, _, _ = _hash(p, shards=4, cut="blocks", backend="ray")
    assert h3 == ref and h4 == ref


@pytest.mark.ray
@pytest.mark.parametrize("chaining,shards,cut", [("compiled-graph", 2, "rows"), ("driver", 3, "cols")])
def test_ray_chainings_through_the_driver_match_local(ray_session, chaining, shards, cut):
    from cluster.jobs.noc import NocGrid
    from cluster.parallel.ray_actors import run_ray
    from sim.noc.summary import summarize_noc

    p = NocParams(rate=0.2, **BASE)
    grid = NocGrid(p)
    regions = grid.regions(shards, cut)
    e, _ = grid.epoch(regions, None)
    o = run_ray(grid.model(regions), regions, e, chaining=chaining)
    assert o.figures.chaining == chaining
    assert summarize_noc(p, o.reports, o.saturated, o.in_transit_flits)["result_hash"] == _hash(p)[0]


@pytest.mark.ray
@pytest.mark.parametrize("chaining", ["direct", "driver"])
def test_a_failing_shard_actor_stops_the_run_with_its_error(ray_session, chaining):
    # the peers of a failed actor must not wait for it forever: its error reaches the driver
    from cluster.jobs.grid import cut_grid, epoch_length, owner_map
    from cluster.jobs.noc import NocModel
    from cluster.parallel.ray_actors import run_ray
    from sim.noc.shard import NocShard

    class Failing(NocShard):
        def advance(self, t0, t1, inbound):
            if self.failing and t0 >= 200:
                raise RuntimeError("shard 1 broke at cycle 200")
            return super().advance(t0, t1, inbound)

    class FailingModel(NocModel):
        def build(self, region, index):
            shard = Failing(self.p, region)
            shard.failing = index == 1
            return self.watching(shard)

    p = NocParams(rate=0.2, **BASE)
    regions = cut_grid(8, 8, 3, "rows")
    e, _ = epoch_length(p, regions, None)
    with pytest.raises(Exception, match="shard 1 broke at cycle 200"):
        run_ray(FailingModel(p, owner_map(regions, 8, 8)), regions, e, chaining=chaining)


@pytest.mark.parametrize("params", CASES, ids=CASE_IDS)
def test_asking_for_lines_ahead_changes_nothing(params):
    """The look-ahead large shards use (kernel.ahead) only prefetches: forced on and off in
    a small shard, every measured figure and the final state are the same."""
    runs = []
    for look in (0, 1, 3):
        shard = NocShard(params, Region(0, params.rows, 0, params.cols))
        shard.prm[kernel.AHEAD] = look
        horizon = params.warmup_cycles + params.measure_cycles + params.drain_cycles
        shard.advance(0, horizon)
        runs.append((dataclasses.asdict(shard.report()), shard.vc.copy(), shard.credit.copy()))
    report0, vc0, credit0 = runs[0]
    assert report0["flit_latency_count"] > 1000
    for report, vc, credit in runs[1:]:
        assert report.keys() == report0.keys()
        for name, value in report.items():
            assert np.array_equal(value, report0[name]), name
        assert np.array_equal(vc, vc0) and np.array_equal(credit, credit0)
