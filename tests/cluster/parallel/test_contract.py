"""The shard contract (cluster/parallel/model.py) held by every model, one ``simulate`` for all of
them, and the epoch arithmetic (cluster/parallel/epochs.py) against windows worked by hand."""

import dataclasses
import math

import pytest

from cluster.config import load
from cluster.config.run import RUN_SCHEMA, system_config
from cluster.errors import UserError
from cluster.jobs.chip import ChipGrid, simulate_chip
from cluster.jobs.noc import NocGrid, simulate_noc
from cluster.jobs.system import SystemGroups, simulate_system
from cluster.parallel.backends import BACKENDS, run_backend
from cluster.parallel.epochs import (
    MAX_WINDOW,
    bounds_windows,
    first_window,
    idle_rule,
    meta_after,
    next_window,
    stop_rule,
)
from cluster.parallel.local import LocalRun
from cluster.parallel.model import (
    BoundedShard,
    Decomposition,
    EpochMeta,
    EpochShard,
    ShardModel,
    Stop,
    Traffic,
)
from cluster.parallel.simulate import simulate
from sim.noc.params import NocParams
from sim.system.config import FIDELITY
from sim.traffic import Columnar
from tests.sim.chip.chiprun import config as chip_config

INF = float("inf")
NOC = NocParams(rows=6, cols=6, rate=0.2, warmup_cycles=200, measure_cycles=400, drain_cycles=2000)
KV = {"workload": {"kind": "kv-decode", "decode": {
    "requests": 3, "max_batch": 2, "layers": 1, "heads": 1,
    "prompt_tokens": {"dist": "uniform", "min": 8, "max": 16},
    "output_tokens": {"dist": "uniform", "min": 2, "max": 3}}}}
RING = {"system": {"chips": 4, "chip": "SN30", "network": [
    {"kind": "r", "size": 4, "link_bandwidth": "64GB/s", "link_latency": "500ns", "parallelism": "TP"}]},
    "workload": {"kind": "collective", "collective": {"op": "all_reduce", "nbytes": 1 << 16}}}


def _ring():
    return system_config(load(RUN_SCHEMA, raw=RING))


@pytest.fixture(scope="module")
def jobs():
    """The three jobs as Decompositions."""
    return {"noc": NocGrid(NOC), "chip": ChipGrid(chip_config(KV)), "system": SystemGroups(_ring())}


@pytest.mark.parametrize("name", ["noc", "chip", "system"])
def test_every_model_and_its_shards_hold_the_contract(jobs, name):
    job = jobs[name]
    assert isinstance(job, Decomposition)
    regions = job.regions(2, "cols")  # the chip's kv-decode sends nothing across a row cut
    model = job.model(regions)
    nothing = model.empty()
    assert isinstance(model, ShardModel) and isinstance(nothing, Traffic) and isinstance(nothing, Columnar)
    # the contract is narrow: build, route, stop, and the traffic type's witness; the rest is derived
    members = {*ShardModel.__annotations__, *(m for m in vars(ShardModel) if not m.startswith("_"))}
    assert members == {"horizon", "build", "empty", "split", "stop"}
    run = LocalRun(model, regions, job.epoch(regions, None)[0])
    shards = run.shards
    assert all(isinstance(s, EpochShard) for s in shards)
    # every shard bounds its output from its state (a system's: from its next events and its links)
    assert all(isinstance(s, BoundedShard) for s in shards)
    assert all(bounds_windows(s, 2) for s in shards)
    assert not any(bounds_windows(s, 1) for s in shards)  # one shard: nothing to bound
    # what a shard sends travels through the wire's sections and back, every column equal
    while not any(len(b) for b in run.inbound) and not run.run(until=run.reached + 1):
        pass  # epoch by epoch until something crosses the cut
    out = nothing.join(run.inbound)
    assert len(out) and len(nothing) == 0, name
    back = nothing.decode(out.encode())
    assert type(back) is type(out) and back.flit_count() == out.flit_count() and back.earliest() == out.earliest()
    assert [[c.tolist() for c in sec] for sec in back.encode()] == [[c.tolist() for c in sec] for sec in out.encode()]
    assert len(nothing.encode()) == len(nothing.widths()) == len(out.widths())


def _summarised(name, cfg, shards):
    run = {"noc": simulate_noc, "chip": simulate_chip}.get(name)
    if run is not None:
        return run(cfg, shards=shards, cut="cols")
    return simulate_system(cfg, shards=shards)


@pytest.mark.parametrize("name", ["noc", "chip", "system"])
def test_one_and_two_shards_simulate_the_same_run(name):
    cfg = {"noc": NOC, "chip": chip_config(KV), "system": _ring()}[name]
    one, two = _summarised(name, cfg, 1), _summarised(name, cfg, 2)
    assert one.summary["result_hash"] == two.summary["result_hash"]
    assert one.summary["sim_cycles"] == two.summary["sim_cycles"] > 0
    s1, s2 = one.simulation, two.simulation
    assert (s1.shards, s2.shards) == (1, 2) and len(s2.outcome.reports) == 2 and s2.backend == "local"
    assert s2.outcome.epochs > s1.outcome.epochs  # the two shards really exchanged epochs
    assert s2.lookahead and s2.epoch <= s2.lookahead  # conservative: no window shorter than the cut allows
    assert s2.distribution["epochs"] == s2.outcome.epochs


def test_simulate_takes_any_decomposition_and_says_how_it_cut(jobs):
    sim = simulate(jobs["noc"], 3, "cols")
    # 6 columns in 3 bands of 2; a flit granted the switch reaches the far router after switch
    # allocation, traversal and the link (1 + 1 + 1 cycles), its credit returns in 3: the lookahead
    assert [(r.col0, r.col1) for r in sim.regions] == [(0, 2), (2, 4), (4, 6)]
    assert (NOC.sw_alloc_delay, NOC.st_delay, NOC.link_latency, NOC.credit_return) == (1, 1, 1, 3)
    assert sim.cut == "cols" and sim.lookahead == 3 == sim.epoch
    assert sim.plan is not None and sim.plan.shards == 3 and sim.plan.reason == "requested"


def test_a_model_without_pilots_takes_a_count():
    with pytest.raises(ValueError, match="takes no pilot"):
        simulate(SystemGroups(_ring()), "auto")
    with pytest.raises(UserError, match="a system of chips takes a count"):
        simulate_system(_ring(), shards="auto")


def test_backends_by_name():
    assert set(BACKENDS) == {"local", "ray"}
    job = NocGrid(NOC)
    regions = job.regions(1, "rows")
    with pytest.raises(ValueError, match="unknown backend 'mpi': one of local, ray"):
        run_backend("mpi", job.model(regions), regions, 8)


def test_a_system_fidelity_is_one_object():
    cfg = _ring()
    net = cfg.net()
    owner = SystemGroups(cfg).model([[0, 1], [2, 3]]).owner
    # a ring of 4 chips in halves {0, 1} | {2, 3}: the links 1-2 and 3-0, each way, are cut
    box = FIDELITY["box"].lookahead_links(net, owner)
    assert sorted({frozenset((net.links[i].src, net.links[i].dst)) for i in box}, key=sorted) == [
        frozenset((0, 3)), frozenset((1, 2))] and len(box) == 4
    # grid chips run an epoch ahead of the network inside a shard too: every link bounds it
    assert FIDELITY["grid"].lookahead_links(net, owner) == list(range(len(net.links))) and len(net.links) == 8
    assert cfg.level is FIDELITY["box"] and not cfg.level.grid
    with pytest.raises(ValueError, match="grid fidelity needs the chip's configuration"):
        dataclasses.replace(cfg, fidelity="grid")


# ------------------------------------------------------------------ the epoch arithmetic
def _meta(t1, next_event=INF, earliest_out=INF, safe_until=INF, created=0, finished=0, t0=0):
    return EpochMeta(t0, t1, next_event, earliest_out, created, finished, safe_until=safe_until)


@pytest.mark.parametrize("metas, window", [
    # nothing anywhere: the longest window from where the last one ended
    ([_meta(100), _meta(100)], (100, 100 + MAX_WINDOW)),
    # skip-ahead: idle until the earliest event anywhere (250), then as long as nothing can cross
    ([_meta(100, next_event=400), _meta(100, next_event=250)], (250, 250 + MAX_WINDOW)),
    # traffic sent due at 120 acts on a third shard no sooner than 120 + 3
    ([_meta(100, next_event=400, earliest_out=120), _meta(100, next_event=250)], (120, 123)),
    # an event already due (90 < 100) starts the window at the last one's end; a shard's state
    # can reach another by 110
    ([_meta(100, next_event=90, safe_until=110), _meta(100, next_event=95)], (100, 110)),
    # never shorter than one lookahead, even when a shard could reach another sooner
    ([_meta(100, next_event=100, safe_until=101), _meta(100)], (100, 103)),
    # shards that cannot bound their output report 0: windows of exactly one lookahead
    ([_meta(100, next_event=130, safe_until=0.0), _meta(100, safe_until=0.0)], (130, 133)),
])
def test_next_window_by_hand(metas, window):
    assert next_window(metas, 3, horizon=10**9) == window


@pytest.mark.parametrize("metas, window", [
    # a window never reaches past the horizon (here 1,000): the longest one is cut there
    ([_meta(900), _meta(900)], (900, 1000)),
    ([_meta(900, next_event=998), _meta(900)], (998, 1000)),
    # nothing left before it: the empty window at the horizon, not a window at the next event
    ([_meta(900, next_event=5000), _meta(900)], (1000, 1000)),
])
def test_next_window_stops_at_the_horizon(metas, window):
    assert next_window(metas, 3, horizon=1000) == window
    assert first_window(3, horizon=1000) == (0, 3) and first_window(3, horizon=2) == (0, 2)


@pytest.mark.parametrize("t1, created, finished, stop", [
    (900, 10, 10, Stop(False, False)),  # all ejected, but the measurement window is still open
    (1000, 10, 10, Stop(True, False)),  # window closed and every measured packet ejected
    (4000, 10, 9, Stop(False, False)),  # one still in flight, before the horizon
    (5000, 10, 9, Stop(True, True)),  # still in flight at the horizon: saturated
])
def test_stop_rule_by_hand(t1, created, finished, stop):
    # two shards' counts are summed: 10 created here, ejected where the packets arrive; traffic
    # is still being made (a next event at t1)
    metas = [_meta(t1, next_event=t1, created=created, finished=0), _meta(t1, created=0, finished=finished)]
    assert stop_rule(metas, measure_end=1000, horizon=5000) == stop


def test_idle_rule_by_hand():
    assert idle_rule([_meta(50), _meta(50)], horizon=100) == Stop(True, False)
    assert idle_rule([_meta(50), _meta(50, earliest_out=60)], horizon=100) == Stop(False, False)  # in transit
    assert idle_rule([_meta(50, next_event=70), _meta(50)], horizon=100) == Stop(False, False)
    assert idle_rule([_meta(100, next_event=170), _meta(100)], horizon=100) == Stop(True, True)
    # nothing left before the horizon (the next event, or traffic in transit, at or after it):
    # cut off now; the next window would start past it
    assert idle_rule([_meta(50, next_event=100), _meta(50)], horizon=100) == Stop(True, True)
    assert idle_rule([_meta(50), _meta(50, earliest_out=150)], horizon=100) == Stop(True, True)
    assert idle_rule([_meta(50, next_event=99), _meta(50)], horizon=100) == Stop(False, False)


def test_stop_rule_with_nothing_left_before_the_horizon():
    # every measured packet ejected and nothing happens before the horizon: finished, though the
    # measurement window is open (nothing more can be created in it)
    assert stop_rule([_meta(900, next_event=6000, created=10, finished=10)], 1000, 5000) == Stop(True, False)
    # one still in flight, but its next move is past the horizon: saturated now
    assert stop_rule([_meta(900, next_event=6000, created=10, finished=9)], 1000, 5000) == Stop(True, True)
    assert stop_rule([_meta(900, next_event=4999, created=10, finished=9)], 1000, 5000) == Stop(False, False)


def test_a_bounded_shard_reports_the_earliest_cycle_it_could_reach_another():
    job = NocGrid(NOC)
    regions = job.regions(2, "rows")
    model = job.model(regions)
    shard = model.build(regions[0], 0)
    for t0 in range(0, 300, 3):  # windows of one lookahead (what crosses the cut is dropped here)
        out = shard.advance(t0, t0 + 3, model.empty())
    bound = shard.earliest_output()
    assert len(bound) == 2 and shard.t == 300
    meta = meta_after(shard, 297, 300, out, bounded=True)
    assert meta.safe_until == float(bound.min()) and meta.safe_until >= 300
    assert meta_after(shard, 297, 300, out, bounded=False).safe_until == 0.0
    created, finished = shard.counters()  # packets created in the measurement window, from cycle 200
    assert (meta.created, meta.finished, meta.t0, meta.t1) == (created, finished, 297, 300) and created > 0
    assert meta.next_event == shard.next_event() and meta.earliest_out == out.earliest()
    assert math.isfinite(meta.next_event)


def test_a_system_shard_bounds_its_output_by_its_next_event_and_its_least_link_latency(jobs):
    job = jobs["system"]
    regions = job.regions(2, "groups")
    model = job.model(regions)
    shard = model.build(regions[0], 0)
    latency = min(lk.latency for lk in shard.net.links if lk.src in shard.nodes)  # 500 ns at the chips' clock
    assert latency == round(500e-9 * job.cfg.clock_hz)
    t = 0
    while math.isfinite(shard.next_event()):  # every message this shard's chips can send on their own
        out = shard.advance(t, t + latency, model.empty())
        bound = shard.earliest_output()
        # nothing it holds moves before its next event, and nothing reaches a node a link away sooner
        assert len(bound) == 2 and (bound == shard.next_event() + latency).all()
        assert out.earliest() >= t + latency  # what it sent does arrive no sooner than a link's latency
        t += latency
    assert (shard.earliest_output() == INF).all()
