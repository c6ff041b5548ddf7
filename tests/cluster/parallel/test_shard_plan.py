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
    # issue 20 item 16: the count "auto" chose is explained in --json and the text on every backend
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

    # an 8x8 mesh under load: a few ms of work per 1,000 cycles against an exchange every
    # 3-cycle window and the actors' start; no count but 1 can pay
    p = NocParams(rows=8, cols=8, rate=0.2, warmup_cycles=300, measure_cycles=700, drain_cycles=2000)
    plan = plan_shards("auto", NocGrid(p), "rows", "ray")
    assert plan.shards == 1 and plan.backend("ray") == "local"
    two = plan.prediction(2)
    assert two is not None and two.speedup < 0.5 and "2 shards on ray: predicted" in plan.reason
    capsys.readouterr()
    # a count within the cores runs at once (no pilot), and hears afterwards, from its own
    # figures, that its exchanges cost more than splitting saved
    forced = plan_shards(2, NocGrid(p), "rows", "ray")
    assert forced.shards == 2 and forced.predictions == [] and capsys.readouterr().err == ""
    sim = simulate(NocGrid(p), 2, "rows", "ray", plan=forced)
    err = capsys.readouterr().err
    work = sum(sim.outcome.figures.busy_seconds)
    assert sim.outcome.wall_seconds > work
    assert err.count("\n") == 1 and "warning: 2 shards on ray took" in err and f"({work:.1f} s" in err


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
