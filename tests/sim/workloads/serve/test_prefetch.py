"""Anchors simulated ahead, side by side (sim/workloads/serve/prefetch.py): the same prices as one
at a time, so the same run.

Known answers: an anchor is a pure function of the chip, memory, NoC, model and shape, so one
simulated in a worker process equals, field for field, the one simulated in the run's process;
the run's steps, requests and result hash do not depend on where its anchors were simulated;
the planning pass at the roofline foresees, on a trace whose steps batch alike at any price,
every anchor the run needs; an anchor foreseen and never needed is reported, not charged.
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from mapping.models import model_preset
from sim.workloads.serve.costs import CostOptions, StepCosts
from sim.workloads.serve.figures import AnchorLog, StepLog
from sim.workloads.serve.scheduler import planned_anchors
from sim.workloads.serve.shapes import StepShape
from tests.sim.chip.chiprun import config, run
from tests.sim.workloads.serve.test_scheduler import logged, trace_file

CHIP = {"preset": "sn40l", "rows": 8, "cols": 16}
# three requests arriving together: a prefill step of all three prompts, then decode steps of
# three, three, two and one sequences whatever the steps cost (nothing arrives later)
ROWS = [(0.0, 40, 4), (0.0, 300, 3), (0.0, 20, 5)]


def _raw(trace: str, workers: int) -> dict:
    return {"chip": CHIP, "memory": {"policy": "virtual"},
            "workload": {"kind": "serve", "decode": {"trace": trace, "model": "llama-3.1-8b",
                                                     "step_workers": workers}},
            "run": {"max_cycles": 10**12}}


def test_anchors_simulated_ahead_give_the_same_run(tmp_path):
    trace = trace_file(tmp_path, ROWS)
    one, two = run(_raw(trace, 1)), run(_raw(trace, 2))
    assert one.summary["status"] == two.summary["status"] == "completed"
    assert one.summary["result_hash"] == two.summary["result_hash"]
    assert [s.row() for s in logged(one, StepLog)] == [s.row() for s in logged(two, StepLog)]
    a1, a2 = logged(one, AnchorLog), logged(two, AnchorLog)
    exact = ("tokens", "keys", "kv_read", "tiles", "cus", "iterations", "cycles", "per_iteration_cycles",
             "efficiency", "messages", "key")
    assert [[getattr(a, f) for f in exact] for a in a1] == [[getattr(a, f) for f in exact] for a in a2]
    assert not any(a.ahead for a in a1) and all(a.used for a in a1)
    # the planning pass foresaw every anchor the run needed (its steps batch alike at any price)
    assert all(a.ahead and a.used for a in a2) and len(a2) == two.summary["anchors"] > 1
    assert two.summary["anchors_unused"] == 0


def test_the_planning_pass_names_the_steps_anchors_in_order(tmp_path):
    """At the roofline: one prefill step of the three prompts (360 tokens, 40*41/2 + 300*301/2 +
    20*21/2 pairs) making every first token, then decode steps of 3, 3, 2 and 1 sequences (4, 3
    and 5 tokens to make); their anchors in order of first need."""
    cfg = config(_raw(trace_file(tmp_path, ROWS), 2))
    costs = StepCosts(cfg, model_preset("llama-3.1-8b"), cfg.workload.costs)
    prefill = StepShape(360, 40 * 41 // 2 + 300 * 301 // 2 + 20 * 21 // 2, 0)
    decode = [StepShape.of([40, 300, 20], []), StepShape.of([41, 301, 21], []), StepShape.of([42, 22], []),
              StepShape.of([23], [])]
    want = list(dict.fromkeys(costs.anchor_of(s) for s in [prefill, *decode]))
    assert planned_anchors(cfg) == want


def test_an_anchor_no_step_needed_is_logged_unused(tmp_path):
    """A planner foreseeing two anchors, a run pricing one: the one priced comes from its worker
    equal to the one simulated in this process; the other is logged with ``used`` false."""
    cfg = config(_raw(trace_file(tmp_path, ROWS), 2))
    m = model_preset("llama-3.1-8b")
    alone = StepCosts(cfg, m, CostOptions(workers=1))
    need, spare = alone.anchor_of(StepShape(1, 16, 16)), alone.anchor_of(StepShape(4, 1024, 1024))
    assert (need, spare) == (StepShape(1, 16, 16), StepShape(4, 1024, 1024))  # anchors as they are
    ahead = StepCosts(cfg, m, CostOptions(workers=2), planner=lambda: [need, spare])
    assert ahead.efficiency(need) == alone.efficiency(need)
    logs = ahead.finish()
    assert [(a.tokens, a.ahead, a.used) for a in logs] == [(1, True, True), (4, True, False)]
    [one] = alone.finish()
    timing = {"wall_seconds", "ahead", "used"}
    assert {k: v for k, v in asdict(logs[0]).items() if k not in timing} == \
        {k: v for k, v in asdict(one).items() if k not in timing}


def test_an_anchor_that_fails_ahead_fails_the_step_that_needs_it(tmp_path):
    """An anchor whose run does not end within run.max_cycles: from a worker, the step needing it
    gets the same error as when simulated in the run's process."""
    raw = _raw(trace_file(tmp_path, ROWS), 2)
    raw["run"]["max_cycles"] = 1000
    cfg = config(raw)
    m = model_preset("llama-3.1-8b")
    shape = StepShape(1, 16, 16)
    errors = []
    for costs in (StepCosts(cfg, m, CostOptions(workers=2), planner=lambda: [shape, StepShape(4, 1024, 1024)]),
                  StepCosts(cfg, m, CostOptions(workers=1))):
        with pytest.raises(ValueError) as exc:
            costs.efficiency(shape)
        errors.append(str(exc.value))
        costs.finish()
    assert errors[0] == errors[1] and "did not end within 1,000 cycles" in errors[0]


def test_a_run_from_the_step_cache_hashes_as_the_cold_run(tmp_path):
    """Where its anchors came from (simulated, ahead or not, or read from the step cache) is how a
    run was computed, not what it simulated: its result hash is the cold run's."""
    raw = _raw(trace_file(tmp_path, ROWS), 2)
    raw["workload"]["decode"]["step_cache"] = str(tmp_path / "steps")
    cold, warm = run(raw), run(raw)
    assert (cold.summary["anchors_cached"], warm.summary["anchors_cached"]) == (0, cold.summary["anchors"])
    assert warm.summary["result_hash"] == cold.summary["result_hash"]
