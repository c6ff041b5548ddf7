"""run.shards = "auto" and the cost model behind it (cluster/parallel/shard_plan.py)."""

import json

import pytest

from cluster.cli import main
from cluster.jobs.noc import simulate_noc
from sim.noc.params import NocParams

QUICK = ["--k", "4", "--set", "noc.warmup_cycles=200", "--set", "noc.measure_cycles=500", "--quiet"]


def test_auto_in_process_runs_one_process(capsys):
    # shards in one process run one after another: more of them can only cost exchanges
    assert main(["noc", "--rate", "0.2", "--shards", "auto", "--json", *QUICK]) == 0
    auto = json.loads(capsys.readouterr().out)
    main(["noc", "--rate", "0.2", "--json", *QUICK])
    one = json.loads(capsys.readouterr().out)
    assert auto["shards"] == 1 and auto["result_hash"] == one["result_hash"]


LOCAL_REASON = ('auto: 1 process (the local backend runs shards one after another in this process, so more of '
                'them only add exchanges; run.backend = "ray" runs them side by side)')


@pytest.mark.parametrize("command", [["noc", "--rate", "0.2", *QUICK],
                                     ["run", "examples/race.toml", "--set", "workload.race.trials=1", "--quiet"]])
def test_auto_says_why_on_the_local_backend_too(capsys, command):
    # the count "auto" chose is explained in --json and the text on every backend
    assert main([*command, "--shards", "auto", "--json"]) == 0
    auto = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (auto["shards"], auto["shards_reason"]) == (1, LOCAL_REASON)
    assert main([*command, "--shards", "auto"]) == 0
    assert LOCAL_REASON in capsys.readouterr().out
    assert main([*command, "--json"]) == 0  # a count given, not chosen: nothing to explain
    assert "shards_reason" not in json.loads(capsys.readouterr().out.splitlines()[0])


def test_a_sharded_run_says_how_it_spent_its_time_and_a_whole_one_does_not(capsys):
    assert main(["noc", "--rate", "0.2", "--shards", "2", "--json", *QUICK]) == 0
    two = json.loads(capsys.readouterr().out)
    assert two["chaining"] == "in-process" and len(two["simulate_seconds_per_shard"]) == 2
    assert two["window_mean"] >= 1 and two["peak_rss_mb_per_shard"][0] > 0  # in-process: the one process
    assert main(["noc", "--rate", "0.2", "--shards", "2", *QUICK[:-1]]) == 0
    assert f"2 shards (in-process): {two['epochs']:,} epochs, windows mean" in capsys.readouterr().out
    assert main(["noc", "--rate", "0.2", "--json", *QUICK]) == 0
    assert "window_mean" not in json.loads(capsys.readouterr().out)


def test_forced_count_runs_exactly_that_many_shards_and_reports_them():
    p = NocParams(rows=8, cols=8, rate=0.2, warmup_cycles=300, measure_cycles=700, drain_cycles=2000)
    sim = simulate_noc(p, shards=3, cut="cols").simulation
    o, x = sim.outcome, sim.distribution
    assert sim.shards == 3 and len(o.reports) == 3 and len(x["simulate_seconds_per_shard"]) == 3
    assert len(x["exchange_seconds_per_shard"]) == 3 and x["peak_rss_mb_per_shard"][0] > 0
    assert 1 <= x["window_median"] <= x["window_mean"] * 10 and x["epochs"] == o.epochs


@pytest.mark.ray
def test_auto_on_ray_keeps_a_small_grid_in_one_process_and_a_forced_count_hears_it_lost(ray_session, capsys):
    from cluster.jobs.noc import NocGrid
    from cluster.parallel.shard_plan import plan_shards
    from cluster.parallel.simulate import simulate

    # an 8x8 mesh under load: its whole run takes less than the opening "auto" runs it for in
    # this process, so it is done there before any count is weighed
    p = NocParams(rows=8, cols=8, rate=0.2, warmup_cycles=300, measure_cycles=700, drain_cycles=2000)
    auto = simulate_noc(p, "auto", "rows", "ray")
    sim = auto.simulation
    assert sim.shards == 1 and sim.backend == "local" and sim.plan is not None
    assert sim.plan.reason == "auto: 1 process (the run ended within its opening)" and sim.plan.seconds == 0.0
    assert auto.summary["result_hash"] == simulate_noc(p).summary["result_hash"]  # the same run, whole
    capsys.readouterr()
    # a count within the cores runs at once (no plan), and hears afterwards, from its own
    # figures, that its exchanges cost more than splitting saved
    forced = plan_shards(2, NocGrid(p), "rows", "ray")
    assert forced.shards == 2 and forced.predictions == [] and capsys.readouterr().err == ""
    sim = simulate(NocGrid(p), 2, "rows", "ray", plan=forced)
    err = capsys.readouterr().err
    work = sum(sim.outcome.figures.busy_seconds)
    assert sim.outcome.wall_seconds > work
    assert err.count("\n") == 1 and "warning: 2 shards on ray took" in err and f"({work:.1f} s" in err


def _short_opening(monkeypatch):
    """Stretches of opening short enough that a small test run outlasts the first."""
    from cluster.parallel import shard_plan

    monkeypatch.setattr(shard_plan, "OPENING_SECONDS", 0.01)
    monkeypatch.setattr(shard_plan, "_cores", lambda address: 2.0)


def test_a_run_kept_in_one_process_goes_on_from_its_opening(monkeypatch):
    _short_opening(monkeypatch)
    # a 12x12 mesh: a fraction of a millisecond of work a cycle, against an exchange and the
    # actors' bookkeeping every 3-cycle window of a cut crossed by flits every cycle: no count pays
    p = NocParams(rows=12, cols=12, rate=0.1, warmup_cycles=500, measure_cycles=1500, drain_cycles=3000)
    done = simulate_noc(p, "auto", "rows", "ray")
    auto = done.simulation
    plan = auto.plan
    assert auto.shards == 1 and auto.backend == "local" and plan is not None and plan.chosen
    assert plan.reason.startswith("auto: 1 process (from the cut's traffic: 2 shards on ray: predicted")
    two = plan.prediction(2)
    assert two is not None and two.speedup < 1 and two.window_mean == 3.0  # windows of one lookahead
    assert plan.seconds == 0.0  # deciding took no time outside the run: no pilot, the opening kept
    one = simulate_noc(p)
    assert done.summary["result_hash"] == one.summary["result_hash"] and done.summary["measured_packets"] > 1000
    assert done.summary["sim_cycles"] == one.summary["sim_cycles"]  # the same run, the opening's windows shorter


def test_a_decomposition_without_figures_pilots_the_cut(monkeypatch):
    from cluster.jobs.noc import NocGrid
    from cluster.parallel.model import MeasuresCuts
    from cluster.parallel.shard_plan import choose_count

    _short_opening(monkeypatch)

    class Blind:  # the NoC grid, without its cut figures
        def __init__(self, job):
            self.job, self.pilots = job, True

        def __getattr__(self, name):
            if name == "cut_figures":
                raise AttributeError(name)
            return getattr(self.job, name)

    p = NocParams(rows=12, cols=12, rate=0.1, warmup_cycles=500, measure_cycles=1500, drain_cycles=3000)
    job = Blind(NocGrid(p))
    assert not isinstance(job, MeasuresCuts) and isinstance(NocGrid(p), MeasuresCuts)
    d = choose_count(job, "rows", 2.0)
    assert d.plan.shards == 1 and d.plan.reason.startswith("auto: 1 process (from a pilot: 2 shards on ray")
    assert d.opening is not None and not d.opening.stop.done  # kept, to go on with


def test_a_cut_that_makes_no_other_count_is_not_weighed():
    from cluster.jobs.noc import NocGrid
    from cluster.parallel.shard_plan import choose_count

    d = choose_count(NocGrid(NocParams(rows=1, cols=8, rate=0.1)), "rows", 2.0)
    assert d.plan.shards == 1 and d.opening is None
    assert d.plan.reason == "auto: 1 process (a rows cut makes no other count on 2 cores)"


@pytest.mark.parametrize("work, crossings, lookahead, expect", [
    # three quarters of the work in one shard, a flit across the cut every 10 cycles
    ((3.0, 1.0), 100.0, 3, "pilot"),
    # the same, the cut crossed every cycle: windows of one lookahead, a loss
    ((3.0, 1.0), 1000.0, 3, "loses"),
    # all the work in one shard: even free exchanges gain nothing
    ((1.0, 0.0), 0.0, 3, "loses"),
    # halves, a long lookahead: even windows of one lookahead gain more than MARGIN
    ((1.0, 1.0), 1000.0, 50, "wins"),
])
def test_a_cut_judged_by_hand(work, crossings, lookahead, expect):
    from cluster.parallel.epochs import MAX_WINDOW
    from cluster.parallel.model import CutFigures
    from cluster.parallel.shard_plan import (
        ACTOR_START_SECONDS,
        EPOCH_SECONDS,
        EXCHANGE_SECONDS,
        FREE_GAIN,
        MARGIN,
        judge,
    )

    r1, cycles = 1e-3, 10**6  # one process: 1 ms a cycle, a run of a million cycles
    fig = CutFigures(1000, work, crossings)
    v = judge(fig, lookahead, r1, cores=2, cycles=cycles)
    share = max(work) / sum(work)
    per_epoch = EPOCH_SECONDS + EXCHANGE_SECONDS  # two actors: one peer each

    def speedup(epochs_per_cycle):
        return r1 * cycles / ((share * r1 + epochs_per_cycle * per_epoch) * cycles + ACTOR_START_SECONDS)

    estimate = min(max(crossings / 1000, 1 / MAX_WINDOW), 1 / lookahead)
    assert v.best.speedup == pytest.approx(speedup(estimate)) and v.best.window_mean == pytest.approx(1 / estimate)
    assert v.optimistic == pytest.approx(speedup(1 / MAX_WINDOW))
    assert v.pessimistic == pytest.approx(speedup(1 / lookahead))
    assert v.best.largest_share == share
    verdict = "loses" if v.loses else "wins" if v.settled else "pilot"
    assert verdict == expect, (v, FREE_GAIN, MARGIN)
    # on a machine so loaded that the opening took 4 times its CPU time, the exchanges and the
    # actors' start (measured quiet) are taken to stretch as much
    loaded = judge(fig, lookahead, r1, cores=2, cycles=cycles, stretch=4.0)
    slow = r1 * cycles / ((share * r1 + estimate * per_epoch * 4) * cycles + 4 * ACTOR_START_SECONDS)
    assert loaded.best.speedup == pytest.approx(slow) and loaded.best.speedup < v.best.speedup


def test_cut_figures_by_hand():
    import numpy as np

    from cluster.jobs.grid import cut_figures, cut_grid
    from sim.network import LinkCounts

    # a 2x4 mesh (routers 0-3 on top, 4-7 below); ports 1 E, 2 W, 3 S, 4 N
    p = NocParams(rows=2, cols=4)
    links = LinkCounts(router=np.array([1, 2, 0, 5, 6]), port=np.array([1, 2, 3, 1, 4]),
                       flits=np.array([5, 7, 2, 11, 3]))
    # two column bands {0, 1, 4, 5} | {2, 3, 6, 7}: 1->2 (5) and 2->1 (7) and 5->6 (11) cross it
    f = cut_figures(p, links, 100, cut_grid(2, 4, 2, "cols"))
    assert f.work == (5 + 2 + 11, 7 + 3) and f.crossings == 5 + 7 + 11 and f.cycles == 100
    # two row bands {0-3} | {4-7}: only 0->4 (2, south) and 6->2 (3, north) cross it
    f = cut_figures(p, links, 100, cut_grid(2, 4, 2, "rows"))
    assert f.work == (5 + 7 + 2, 11 + 3) and f.crossings == 2 + 3
    assert f.since(cut_figures(p, LinkCounts(*(np.zeros(0, int) for _ in range(3))), 40, cut_grid(2, 4, 2, "rows"))) \
        == type(f)(60, f.work, f.crossings)
    assert f.shares == (14 / 28, 14 / 28)


def test_a_count_that_paid_or_that_a_pilot_chose_hears_nothing_after():
    from cluster.parallel.distribution import lost_to_one_process
    from cluster.parallel.model import BackendFigures, RunOutcome
    from cluster.parallel.shard_plan import Plan, Prediction

    def outcome(wall: float, busy: list[float]) -> RunOutcome:
        figures = BackendFigures("direct", busy, [wall - b for b in busy], [0] * len(busy), 3.0, 3.0)
        return RunOutcome([None] * len(busy), 100, 1000, False, wall, 0.0, 0, figures)

    given = Plan(2, [], "requested")
    assert lost_to_one_process(given, outcome(3.0, [2.0, 2.0]), "ray") is None  # 3 s against 4 s of work: paid
    assert "took 5.0 s" in (lost_to_one_process(given, outcome(5.0, [2.0, 2.0]), "ray") or "")
    assert lost_to_one_process(given, outcome(5.0, [2.0, 2.0]), "local") is None  # in-process: by design
    piloted = Plan(2, [Prediction(1, 1.0, 1.0, 128.0), Prediction(2, 2.0, 0.5, 3.0)], "requested")
    assert lost_to_one_process(piloted, outcome(5.0, [2.0, 2.0]), "ray") is None  # its warning came before
    assert lost_to_one_process(Plan(2, [], "auto: 2 shards"), outcome(5.0, [2.0, 2.0]), "ray") is None


def test_the_cost_model_charges_the_lockstep_path_exchanges_and_the_actors_start():
    from cluster.parallel.shard_plan import ACTOR_START_SECONDS, EXCHANGE_SECONDS, Pilot

    one = Pilot(1, lockstep=1e-3, total=1e-3, epochs=1 / 1024)
    # two shards that split the work evenly overall but take turns being slow: every epoch
    # waits for the slower, so the lockstep path (0.7 ms a cycle), not half the work, counts
    two = Pilot(2, lockstep=0.7e-3, total=1.0e-3, epochs=1 / 3)
    cycles = 10_000
    per_cycle = 0.7e-3 + EXCHANGE_SECONDS / 3
    p = two.predict(one, cores=2, cycles=cycles)
    assert p.seconds_per_kcycle == pytest.approx(per_cycle * 1e3)
    assert p.speedup == pytest.approx(10.0 / (per_cycle * cycles + ACTOR_START_SECONDS))
    # on one core both shards run in one actor, one after another: all the work counts, no exchange
    on_one = two.predict(one, cores=1, cycles=cycles)
    assert on_one.seconds_per_kcycle == pytest.approx(1.0e-3 * 1e3)
    assert on_one.speedup == pytest.approx(10.0 / (1.0e-3 * cycles + ACTOR_START_SECONDS))
    # a long run amortises the start; one process pays none
    assert two.predict(one, cores=2, cycles=10**9).speedup == pytest.approx(1e-3 / per_cycle, rel=1e-4)
    assert one.predict(one, cores=2, cycles=cycles).speedup == pytest.approx(1.0)


def test_shards_beyond_the_cores_share_actors_one_a_core():
    from cluster.parallel.shard_plan import ACTOR_START_SECONDS, EXCHANGE_SECONDS, Pilot, actors_for

    one = Pilot(1, lockstep=1e-3, total=1e-3, epochs=1 / 1024)
    # 4 shards on 2 cores, every epoch 10 cycles: 2 actors of 2 shards, all the work on 2 cores,
    # an exchange between the 2 actors an epoch
    four = Pilot(4, lockstep=0.3e-3, total=1.2e-3, epochs=1 / 10)
    assert [actors_for(n, 2) for n in (1, 2, 3, 4)] == [1, 2, 2, 2] and actors_for(4, 16) == 4
    p = four.predict(one, cores=2, cycles=1000)
    per_cycle = 1.2e-3 / 2 + EXCHANGE_SECONDS / 10
    assert p.seconds_per_kcycle == pytest.approx(per_cycle * 1e3)
    assert p.speedup == pytest.approx(1.0 / (per_cycle * 1000 + ACTOR_START_SECONDS))
    assert p.describe("ray").startswith(f"4 shards on ray: predicted {p.speedup:.2f}x of 1 process")
    slow = four.predict(one, cores=2, cycles=100)  # mostly the actors' start: said as a slowdown
    assert f"predicted {1 / slow.speedup:.1f}x slower than 1 process" in slow.describe("ray")
