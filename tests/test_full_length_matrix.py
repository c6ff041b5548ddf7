"""benchmarks/full_length.py --matrix: every memory policy x on_oom as one sweep over one anchor store.

The smoke matrix (2 policies x 2 on_oom on the hour's first 2 s, an 8 x 16 chip) runs once for the
module, through the sweep machinery, and again over its own directory (a resume). What is checked
is what the anchor store promises (cache.py: on_oom is out of an anchor's key unless its run ran
out of memory, the policy in it), what the sweep promises (a rerun runs nothing again), and the
projection's closed form (list scheduling of n <= W points: the longest point's seconds).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT, benchmark

SCRIPT = ROOT / "benchmarks" / "full_length.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> tuple[Path, list[dict], list[dict]]:
    out = tmp_path_factory.mktemp("matrix")
    first = _run("--matrix", "--smoke", "--out", str(out))
    assert first.returncode == 0, first.stderr[-2000:]
    again = _run("--matrix", "--smoke", "--out", str(out))
    assert again.returncode == 0, again.stderr[-2000:]
    return out, [json.loads(x) for x in first.stdout.splitlines()], [json.loads(x) for x in again.stdout.splitlines()]


def test_every_point_and_a_total_with_their_keys(smoke):
    _, lines, _ = smoke
    points_keys, total_keys = benchmark("full_length").MATRIX_KEYS
    *points, total = lines
    assert [(p["policy"], p["on_oom"]) for p in points] == [("virtual", "stall"), ("static-single", "stall"),
                                                            ("virtual", "preempt"), ("static-single", "preempt")]
    assert all(tuple(p) == points_keys for p in points) and tuple(total) == total_keys
    assert all(p["done"] and p["status"] == "completed" and p["requests_served"] == p["trace_requests"] == 2
               for p in points)


def test_a_policy_simulates_its_anchors_once_and_its_other_on_oom_reuses_them(smoke):
    _, lines, _ = smoke
    *points, total = lines
    for policy in ("virtual", "static-single"):
        mine = [p for p in points if p["policy"] == policy]
        simulated = [p["anchors_simulated"] for p in mine]
        assert sorted(simulated)[0] == 0 and sorted(simulated)[1] > 0, mine  # one point simulates, one reuses
        cold = next(p for p in mine if p["anchors_simulated"])
        warm = next(p for p in mine if not p["anchors_simulated"])
        assert warm["anchors_reused"] == cold["anchors_simulated"]  # every anchor the cold point made, read back
        assert warm["point_cpu_seconds"] < cold["point_cpu_seconds"]
    assert total["anchors_simulated"] == sum(p["anchors_simulated"] for p in points) > 0
    assert total["anchors_reused"] == sum(p["anchors_reused"] for p in points)


def test_the_projection_is_the_longest_point_when_every_point_has_a_worker(smoke):
    _, lines, _ = smoke
    *points, total = lines
    assert total["points"] == total["points_done"] == 4 and total["points_projected"] == 0
    assert total["cluster"] == "16x2" and total["target_wall_seconds"] == 3600.0
    assert total["projected_wall_seconds"] == pytest.approx(max(p["point_cpu_seconds"] for p in points), abs=0.051)
    assert total["cpu_seconds"] == pytest.approx(sum(p["point_cpu_seconds"] for p in points), abs=0.01)


def test_a_rerun_resumes_runs_nothing_and_prints_the_same(smoke):
    out, first, again = smoke
    assert again == first
    assert (out / "policy-matrix-smoke.toml").exists() and (out / "policy-matrix-smoke-cpu.json").exists()


def test_missing_points_are_projected_from_the_done_ones(tmp_path):
    """Two points done (one simulating its policy's anchors, 10 s; one reusing them, 1 s): the other
    policy's first point is projected as a cold one, its second as a warm one."""
    from cluster.sweep.plan import plan_sweep
    from cluster.sweep.resume import interleaved

    fl = benchmark("full_length")
    plan = plan_sweep(fl.matrix_spec(str(tmp_path), smoke=True))
    by = {(p.values["memory.policy"], p.values["memory.on_oom"]): p.id for p in plan.points}
    cold, warm = by["virtual", "stall"], by["virtual", "preempt"]
    rows = {cold: {"memory_policy": "virtual", "anchors": 2, "anchors_cached": 0},
            warm: {"memory_policy": "virtual", "anchors": 2, "anchors_cached": 2}}
    seconds, guessed = fl.projected(plan, rows, {cold: 10.0, warm: 1.0})
    want = {cold: 10.0, warm: 1.0, by["static-single", "stall"]: 10.0, by["static-single", "preempt"]: 1.0}
    order = [p.id for p in interleaved(plan.points)]
    assert guessed == 2 and seconds == [want[i] for i in order]
    assert fl.projected(plan, {}, {}) == (None, 4)  # nothing done: nothing to project from


def test_status_needs_the_matrix_directory():
    got = _run("--matrix", "--status")
    assert got.returncode == 2 and "--out" in got.stderr
