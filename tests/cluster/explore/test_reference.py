"""Explore's answer readable: a reference point from the base config's own run (or the spec's,
or the worst feasible + 10 %), stated with its rule; a normalised hypervolume beside the raw one; every trial's
ending counted."""

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cluster.cli import main
from cluster.explore.front import normalized
from cluster.explore.reference import FALLBACK, FROM_BASE, GIVEN, reference
from cluster.explore.spec import Objective, read_explore
from cluster.explore.tally import line, tally

THROUGHPUT, MEMORY = Objective("tokens_per_second", "maximize"), Objective("peak_mu_reserved", "minimize")


def test_the_reference_is_the_base_run_twice_as_bad_else_the_worst_feasible_plus_10_percent():
    losses = np.array([[-100.0, 0.2], [-300.0, 0.6]])  # feasible trials as losses (throughput negated)
    base = {"status": "completed", "tokens_per_second": 200.0, "peak_mu_reserved": 0.5}
    got = reference((THROUGHPUT, MEMORY), None, base, losses)
    assert got.values == {"tokens_per_second": 100.0, "peak_mu_reserved": 1.0}
    assert got.sources == {"tokens_per_second": FROM_BASE, "peak_mu_reserved": FROM_BASE}
    # a base run that deadlocked gives nothing: every objective falls back (worst + 10 % of the range)
    stuck = reference((THROUGHPUT, MEMORY), None, {**base, "status": "deadlocked"}, losses)
    assert stuck.values == pytest.approx({"tokens_per_second": 80.0, "peak_mu_reserved": 0.64})
    assert set(stuck.sources.values()) == {FALLBACK}
    # a value of 0 cannot be made twice as bad: that objective alone falls back
    zero = reference((THROUGHPUT, MEMORY), None, {**base, "peak_mu_reserved": 0.0}, losses)
    assert zero.sources == {"tokens_per_second": FROM_BASE, "peak_mu_reserved": FALLBACK}
    given = reference((THROUGHPUT, MEMORY), {"tokens_per_second": 1.0, "peak_mu_reserved": 2.0}, base, losses)
    assert given.values == {"tokens_per_second": 1.0, "peak_mu_reserved": 2.0}
    assert set(given.sources.values()) == {GIVEN}
    assert reference((THROUGHPUT, MEMORY), None, None, np.empty((0, 2))) is None  # no basis at all
    assert "tokens_per_second = 100 tokens/s (base run / 2)" in got.describe((THROUGHPUT, MEMORY))


def test_the_normalised_hypervolume_is_the_share_of_the_box_from_the_ideal_point_to_the_reference():
    losses, ref = np.array([[1.0, 3.0], [2.0, 1.0]]), np.array([4.0, 4.0])
    # dominated: (4-1)(4-3) + (4-2)(3-1) = 7 of the box from the ideal (1, 1) to (4, 4): 9
    assert normalized(losses, ref, 7.0) == pytest.approx(7 / 9)
    assert normalized(np.array([[1.0, 1.0]]), ref, 9.0) == 1.0  # one design best in both: the whole box
    assert normalized(np.array([[5.0, 1.0]]), ref, 0.0) == 0.0  # beyond the reference: an empty box, 0


def _row(trial, rung=0, fidelity="full", status="completed", feasible=True, point_status="ok", error=None,
         value=0.5):
    return {"trial": trial, "rung": rung, "fidelity": fidelity, "status": status, "feasible": feasible,
            "point_status": point_status, "point_error": error, "params": "{}", "value": value}


def test_every_trials_ending_is_counted_by_what_ended_it(tmp_path):
    (tmp_path / "noop.toml").write_text(NOOP)  # its constraints: noop.value <= 0.7 (known), value >= 0.1
    spec = read_explore(tmp_path / "noop.toml")
    rows = [_row(0), _row(1, value=0.05, feasible=False),  # full, completed, but value >= 0.1 broken
            _row(2, fidelity="not-run", point_status="error", feasible=False,
                 error="known constraint violated: noop.value <= 0.7"),
            _row(3, point_status="error", feasible=False, error="ValueError: noop.fail is set"),
            _row(4, fidelity="max_cycles=1000", status="cut_off"),  # a cheap rung, not promoted
            _row(5, fidelity="max_cycles=1000", status="cut_off"), _row(5, rung=1),  # promoted: judged by its full run
            _row(6, status="deadlocked", feasible=False), _row(7, status="cut_off", feasible=False)]
    got = tally(spec, pa.Table.from_pylist(rows))
    assert got == {"feasible": 2, "infeasible: value >= 0.1": 1, "rejected before running: noop.value <= 0.7": 1,
                   "error": 1, "stopped by successive halving": 1, "deadlocked": 1, "cut off": 1}
    assert line(got) == ("8 trials: 2 feasible; 1 stopped by successive halving; 1 rejected before running: "
                         "noop.value <= 0.7; 1 infeasible: value >= 0.1; 1 deadlocked; 1 cut off; 1 error")


NOOP = """
[base.noop]
value = 0.4
[explore]
command = "noop"
budget = 12
optimizer = "random"
[explore.space]
"noop.value" = { type = "real", low = 0.0, high = 1.0 }
"noop.fail" = { type = "categorical", values = [false, true] }
[[explore.objectives]]
metric = "value"
[[explore.constraints]]
expr = "noop.value <= 0.7"
[[explore.constraints]]
expr = "value >= 0.1"
"""


def test_an_exploration_ends_saying_how_its_trials_ended_and_what_its_hypervolume_is_against(tmp_path, capsys):
    (tmp_path / "noop.toml").write_text(NOOP)
    out = tmp_path / "out"
    assert main(["explore", str(tmp_path / "noop.toml"), "--out", str(out), "--in-process"]) == 0
    err = capsys.readouterr().err.splitlines()
    end = next(i for i, text in enumerate(err) if text.startswith("explore: 12 trials: "))
    assert "feasible" in err[end] and "rejected before running: noop.value <= 0.7" in err[end]
    assert err[end + 1].startswith("  front: 1 point; hypervolume ") and "(normalised 1.000" in err[end + 1]
    assert err[end + 2] == "  reference: value = 0.8 (base run x 2)"  # the base's value 0.4, minimised
    base = out / "base.parquet"
    assert pq.read_table(base).to_pylist()[0]["value"] == 0.4
    written = base.stat().st_mtime_ns
    assert main(["explore", str(tmp_path / "noop.toml"), "--out", str(out), "--in-process", "--json",
                 "--budget", "14"]) == 0
    import json

    result = json.loads(capsys.readouterr().out)
    assert base.stat().st_mtime_ns == written  # the base ran once
    assert result["reference"] == {"value": 0.8} and result["reference_from"] == {"value": "base run"}
    best = min(r["value"] for r in result["pareto"])
    assert math.isclose(result["hypervolume"], 0.8 - best) and result["hypervolume_normalized"] == 1.0
    assert sum(result["ended"].values()) == 14


@pytest.mark.slow
def test_the_readme_exploration_gives_a_front_of_several_designs(tmp_path, capsys):
    """examples/explore_kv.toml at the README's --budget 6 (about a minute; benchmarks/eta_accuracy.py runs it)."""
    import json

    from tests.paths import EXAMPLES

    assert main(["explore", str(EXAMPLES / "explore_kv.toml"), "--out", str(tmp_path), "--budget", "6",
                 "--in-process", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["pareto"]) >= 3 and result["feasible"] >= 4
    assert set(result["reference_from"].values()) == {"base run"} and 0 < result["hypervolume_normalized"] <= 1


def test_an_exploration_s_report_draws_its_own_figures_and_the_trials_only_when_asked(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    (tmp_path / "noop.toml").write_text(NOOP.replace("budget = 12", "budget = 6"))
    out = tmp_path / "out"
    assert main(["explore", str(tmp_path / "noop.toml"), "--out", str(out), "--in-process", "--quiet"]) == 0
    assert main(["report", str(out), "--quiet"]) == 0
    written = {p.rsplit("/", 1)[-1] for p in capsys.readouterr().out.split() if p.endswith(".png")}
    assert written and all(w.startswith("explore-") for w in written)  # not base.parquet's, nor the trials'
    assert main(["report", str(out), "--out", str(tmp_path / "asked"), "--x", "noop_value", "--quiet"]) == 0
    assert any(p.endswith("trials-value-vs-noop_value.png") for p in capsys.readouterr().out.split())
