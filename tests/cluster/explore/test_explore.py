"""Explorations end to end on tiny kv-decode runs and on the noop command: the front, reruns, infeasible trials,
successive halving, and Ray."""

import json
import textwrap

import numpy as np
import optuna
import pyarrow.parquet as pq
import pytest

from cluster.cli import main
from cluster.explore.driver import Options, rebuild, run_explore
from cluster.explore.fidelity import promoted
from cluster.explore.pareto import as_losses
from cluster.explore.spec import read_explore
from cluster.explore.trials import FULL, NOT_RUN, read_runs
from cluster.sweep.dataset import read_dataset

TINY = """
[chip]
preset = "plasticine"
rows = 4
cols = 4
mu_bytes = "32KiB"
[noc]
model = "packet"
[memory]
policy = "virtual"
reclaim = "refcount-gated"
block_bytes = "1KiB"
on_oom = "stall"
[workload]
kind = "kv-decode"
[workload.decode]
requests = 6
max_batch = 3
layers = 1
heads = 1
head_dim = 32
dtype_bytes = 2
prompt_tokens = { dist = "uniform", min = 16, max = 48 }
output_tokens = { dist = "uniform", min = 4, max = 12 }
[run]
seed = 1
"""

KV = """
[explore]
budget = {budget}
seed = 3
[explore.space]
"chip.mu_bytes" = {{ type = "ordinal", values = ["8KiB", "16KiB", "32KiB"] }}
"memory.policy" = {{ type = "categorical", values = ["virtual", "static-multi", "realloc-copy"] }}
"memory.block_bytes" = {{ type = "ordinal", values = ["512B", "2KiB"], when = {{ "memory.policy" = "virtual" }} }}
"workload.decode.max_batch" = {{ type = "int", low = 1, high = 6 }}
[[explore.objectives]]
metric = "tokens_per_second"
direction = "maximize"
[[explore.objectives]]
metric = "peak_mu_reserved"
direction = "minimize"
[[explore.objectives]]
metric = "energy_per_token_joules"
direction = "minimize"
"""


def _kv(tmp_path, budget=10, extra=""):
    (tmp_path / "tiny.toml").write_text(TINY)
    spec = tmp_path / "kv.toml"
    spec.write_text('base = "tiny.toml"\n' + textwrap.dedent(KV.format(budget=budget)) + textwrap.dedent(extra))
    return spec


def _files(out):
    """The trials' result rows (one file per run) and when each was written."""
    return {p.name: p.stat().st_mtime_ns for p in (out / "trials" / "run_summary").rglob("*.parquet")}


def test_the_front_is_exactly_the_non_dominated_feasible_trials(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["explore", str(_kv(tmp_path, 14)), "--out", str(out), "--in-process", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = read_dataset(out / "trials").to_pylist()
    assert result["trials"] == 14 and len({r["trial"] for r in rows}) == 14
    metrics = [o["metric"] for o in result["objectives"]]
    good = [r for r in rows if r["feasible"] and r["fidelity"] == FULL]
    assert all(r["status"] == "completed" for r in good) and len(good) >= 5
    losses = as_losses(np.array([[r[m] for m in metrics] for r in good]), [True, False, False])
    dominated = [any(np.all(q <= p) and np.any(q < p) for q in losses) for p in losses]
    listed = {r["trial"] for r in result["pareto"]}
    for r, dom in zip(good, dominated):  # brute force: listed iff non-dominated (a repeated config listed once)
        same = [g["trial"] for g in good if g["params"] == r["params"]]
        assert (not dom) == bool(listed & set(same)), r["trial"]
    assert len(listed) == len({json.dumps(json.loads(r["params"]), sort_keys=True) for r, d in zip(good, dominated)
                               if not d})
    assert sorted(pq.read_table(out / "pareto.parquet")["trial"].to_pylist()) == sorted(listed)
    # the stated reference is the base config's own run, twice as bad in each metric's direction
    base = pq.read_table(out / "base.parquet").to_pylist()[0]
    assert base["status"] == "completed" and set(result["reference_from"].values()) == {"base run"}
    assert result["reference"] == pytest.approx({"tokens_per_second": base["tokens_per_second"] / 2,
                                                 "peak_mu_reserved": base["peak_mu_reserved"] * 2,
                                                 "energy_per_token_joules": base["energy_per_token_joules"] * 2})
    assert result["hypervolume"] > 0


def test_a_rerun_continues_without_recomputing_and_a_larger_budget_adds_trials(tmp_path):
    spec, out = read_explore(_kv(tmp_path, 6)), tmp_path / "out"
    first = run_explore(spec, out, Options(in_process=True, quiet=True))
    before = _files(out)
    assert first.front.trials == 6 and len(before) == 6
    again = run_explore(spec, out, Options(in_process=True, quiet=True))
    assert again.computed == 0 and again.stored == 6 and _files(out) == before
    more = run_explore(spec, out, Options(budget=9, in_process=True, quiet=True))
    after = _files(out)
    assert more.stored == 6 and more.front.trials == 9
    assert {k: after[k] for k in before} == before  # not one stored trial rewritten
    assert sorted(r["trial"] for r in read_dataset(out / "trials").to_pylist()) == list(range(9))


def test_a_spec_asking_another_question_is_not_continued(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["explore", str(_kv(tmp_path, 2)), "--out", str(out), "--in-process", "--quiet"]) == 0
    changed = _kv(tmp_path, 2, '[[explore.objectives]]\nmetric = "latency_p99_cycles"\n')
    assert main(["explore", str(changed), "--out", str(out), "--in-process", "--quiet"]) == 2
    assert "another space, objectives" in capsys.readouterr().err
    assert main(["explore", str(changed), "--out", str(out), "--in-process", "--quiet", "--replace"]) == 0


NOOP = """
[noop]
sleep = 0.0
[explore]
command = "noop"
budget = 16
seed = 0
optimizer = "random"
[explore.space]
"noop.value" = { type = "real", low = 0.0, high = 1.0 }
"noop.fail" = { type = "categorical", values = [false, true] }
[[explore.objectives]]
metric = "value"
direction = "minimize"
[[explore.constraints]]
expr = "noop.value <= 0.7"
[[explore.constraints]]
expr = "value >= 0.1"
"""


def test_infeasible_trials_are_told_as_constraint_violations_never_as_numbers(tmp_path):
    (tmp_path / "noop.toml").write_text(NOOP.replace("[noop]", "[base.noop]"))
    spec, out = read_explore(tmp_path / "noop.toml"), tmp_path / "out"
    assert [k.on_config for k in spec.constraints] == [True, False]  # a config key; a result metric
    run_explore(spec, out, Options(in_process=True, quiet=True))
    rows = read_dataset(out / "trials").to_pylist()
    assert len(rows) == 16
    for r in rows:
        params = json.loads(r["params"])
        rejected = params["noop.value"] > 0.7
        assert r["feasible"] == (not rejected and not params["noop.fail"] and params["noop.value"] >= 0.1)
        assert (r["fidelity"] == NOT_RUN) == rejected  # a known constraint: refused before simulating
        if rejected:
            assert r["point_status"] == "error" and r["point_seconds"] is None
        elif params["noop.fail"]:
            assert r["point_status"] == "error" and "noop.fail" in r["point_error"]
    assert {r["trial"] for r in rows if not r["feasible"]} and {r["trial"] for r in rows if r["feasible"]}
    study = optuna.create_study(directions=["minimize"])
    runs, _ = read_runs(out / "trials", ["value"])
    rebuild(study, spec, runs)
    for t, r in zip(study.trials, sorted(rows, key=lambda r: r["trial"])):
        if r["feasible"]:
            assert t.state == optuna.trial.TrialState.COMPLETE and t.values == [r["value"]]
        else:  # learned through the constraint; no objective value is made up for it
            assert t.state == optuna.trial.TrialState.PRUNED and t.values is None and t.constraints == {
                "infeasible": 1.0}


def test_successive_halving_promotes_by_the_rule_and_each_row_says_its_fidelity(tmp_path):
    spec = read_explore(_kv(tmp_path, 12, "[explore.fidelity]\ncycles = [1500]\neta = 2\n"))
    out = tmp_path / "out"
    run_explore(spec, out, Options(in_process=True, quiet=True))
    runs, _ = read_runs(out / "trials", [o.metric for o in spec.objectives])
    assert {r.fidelity for r in runs} <= {FULL, "max_cycles=1500"}
    assert any(r.fidelity == "max_cycles=1500" for r in runs) and any(r.rung == 1 for r in runs)
    maximize = [o.maximize for o in spec.objectives]
    rung: list = []
    full_trials = {r.trial for r in runs if r.rung == 1}
    for r in runs:  # in-process, runs arrive in trial order: replay the rule on the cut results
        if r.rung != 0 or r.fidelity == FULL or not r.feasible:
            assert r.trial not in full_trials or r.rung == 1
            continue
        rung.append(as_losses(np.array(r.values), maximize)[0])
        assert promoted(rung[-1], rung, 2) == (r.trial in full_trials), r.trial
    assert len(full_trials) < len({r.trial for r in runs})  # some trials never ran in full
    study = optuna.create_study(directions=["maximize", "minimize", "minimize"])
    rebuild(study, spec, runs)
    last = {r.trial: r for r in runs}  # by trial, then rung: a trial's last run
    for t, trial in zip(study.trials, sorted(last)):
        r = last[trial]  # infeasible only for a real failure: a cut run stopped by the rule or unranked is not
        assert t.constraints["infeasible"] == (0.0 if r.feasible or r.status == "cut_off" else 1.0), r


def test_a_repeated_config_is_a_new_trial_that_reuses_the_stored_result(tmp_path):
    (tmp_path / "noop.toml").write_text(textwrap.dedent("""
        [base.noop]
        value = 0.5
        [explore]
        command = "noop"
        budget = 4
        optimizer = "random"
        [explore.space]
        "noop.sleep" = { type = "categorical", values = [0.0] }
        [[explore.objectives]]
        metric = "value"
    """))
    out = tmp_path / "out"
    summary = run_explore(read_explore(tmp_path / "noop.toml"), out, Options(in_process=True, quiet=True))
    rows = sorted(read_dataset(out / "trials").to_pylist(), key=lambda r: r["trial"])
    assert summary.computed == 1 and [r["trial"] for r in rows] == [0, 1, 2, 3]  # the last asks settle in one take
    assert [r["point_node"] for r in rows] == ["in-process", "cache", "cache", "cache"]
    assert {r["config_hash"] for r in rows} == {rows[0]["config_hash"]} and all(r["value"] == 0.5 for r in rows)
    assert len(summary.front.pareto) == 1  # one config, listed once


def test_grid_covers_a_conditional_space_once_and_a_rerun_asks_for_nothing_more(tmp_path):
    (tmp_path / "grid.toml").write_text(textwrap.dedent("""
        [explore]
        command = "noop"
        budget = 100
        optimizer = "grid"
        [explore.space]
        "noop.fail" = { type = "categorical", values = [false, true] }
        "noop.value" = { type = "ordinal", values = [1.0, 2.0, 3.0], when = { "noop.fail" = false } }
        [[explore.objectives]]
        metric = "value"
    """))
    spec, out = read_explore(tmp_path / "grid.toml"), tmp_path / "out"
    assert spec.space.size() == 4  # 3 values without failing, 1 failing (value not asked)
    first = run_explore(spec, out, Options(in_process=True, quiet=True))
    params = sorted(r["params"] for r in read_dataset(out / "trials").to_pylist())
    assert first.front.trials == 4 and len(set(params)) == 4
    again = run_explore(spec, out, Options(in_process=True, quiet=True))
    assert again.computed == 0 and again.front.trials == 4


@pytest.mark.ray
def test_an_exploration_on_local_ray_keeps_trials_in_flight_and_stores_each_once(tmp_path, ray_session):
    (tmp_path / "noop.toml").write_text(NOOP.replace("[noop]", "[base.noop]").replace("sleep = 0.0", "sleep = 0.3")
                                        .replace("budget = 16", "budget = 6\nparallel = 3")
                                        .replace('optimizer = "random"', 'optimizer = "tpe"'))
    out = tmp_path / "out"
    summary = run_explore(read_explore(tmp_path / "noop.toml"), out, Options(quiet=True))
    rows = read_dataset(out / "trials").to_pylist()
    assert sorted(r["trial"] for r in rows) == list(range(6)) and summary.front.trials == 6
    ran = [r for r in rows if r["fidelity"] != NOT_RUN]
    assert ran and all(r["point_node"] not in (None, "in-process") for r in ran)
