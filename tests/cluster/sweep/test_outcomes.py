"""Every run's outcome visible: `rdasim sweep` ends with counts by status and exits 3
when any point did not complete; `rdasim sweep status` gives the same counts and lists the points."""

import json

import pyarrow as pa
import pytest

from cluster.cli import main
from cluster.sweep.outcomes import outcomes, ranges
from tests.paths import pressure_sweep


def test_a_point_counts_once_by_its_worst_row_and_only_points_of_the_sweep_count():
    t = pa.table({"point_id": ["a", "b", "b", "c", "d", "e"], "point_index": [0, 1, 1, 2, 3, 4],
                  "point_status": ["ok", "ok", "ok", "error", "ok", "ok"],
                  "status": ["completed", "completed", "deadlocked", None, "cut_off", "failed"]})
    got = outcomes(t, {"a": 0, "b": 1, "c": 2, "d": 3})  # e: a file of no point of this sweep
    assert got.to_json() == {"completed": 1, "deadlocked": 1, "cut_off": 1, "failed": 0, "error": 1}
    assert got.incomplete == 3 and got.points == {"completed": [0], "deadlocked": [1], "cut_off": [3], "error": [2]}
    assert got.line() == "1 completed, 1 deadlocked, 1 cut off, 0 failed, 1 error rows"
    noc = pa.table({"point_id": ["x"], "point_index": [0], "point_status": ["ok"]})  # no status column: completed
    assert outcomes(noc).to_json()["completed"] == 1
    assert ranges([0, 1, 2, 3, 7, 9, 10]) == "0-3, 7, 9-10"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """One point of each way a run ends, on the over-committed trace (each a second or less)."""
    tmp = tmp_path_factory.mktemp("outcomes")
    spec = pressure_sweep(tmp, """
        [sweep]
        name = "ends"
        command = "run"
        [[points]]
        "memory.policy" = "realloc-copy"            # deadlocks
        [[points]]
        "memory.policy" = "static-multi"            # fails: requests refused
        [[points]]
        "run.max_cycles" = 20000                    # cut off
        [[points]]
        "memory.on_oom" = "preempt"                 # completes
        "workload.decode.requests" = 2
    """)
    return spec, tmp / "out"


def test_sweep_ends_with_counts_by_status_and_exits_3_when_a_point_did_not_complete(mixed, capsys):
    spec, out = mixed
    assert main(["sweep", str(spec), "--out", str(out), "--in-process"]) == 3
    err = capsys.readouterr().err
    assert "1 completed, 1 deadlocked, 1 cut off, 1 failed, 0 error rows" in err
    assert "3 points did not complete (exit status 3)" in err
    assert main(["sweep", str(spec), "--out", str(out), "--in-process", "--quiet"]) == 3  # a rerun: still 3
    assert main(["sweep", "status", str(out)]) == 0
    shown = capsys.readouterr().out
    for line in ("1 completed, 1 deadlocked, 1 cut off, 1 failed, 0 error rows", "deadlocked: point 0",
                 "failed: point 1", "cut off: point 2", "completed: point 3"):
        assert line in shown, shown
    assert main(["sweep", "status", str(out), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["outcomes"] == {"completed": 1, "deadlocked": 1, "cut_off": 1, "failed": 1, "error": 0}
    assert got["points"] == {"deadlocked": [0], "failed": [1], "cut_off": [2], "completed": [3]}


def test_a_sweep_whose_points_all_completed_exits_0(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\nname = "ok"\ncommand = "noop"\n[axes]\nnoop.value = [1.0, 2.0]\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--in-process"]) == 0
    assert "2 completed, 0 deadlocked, 0 cut off, 0 failed, 0 error rows" in capsys.readouterr().err
    spec.write_text(spec.read_text() + "noop.fail = [false, true]\n")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out2"), "--in-process"]) == 3  # error rows too
    assert "2 completed, 0 deadlocked, 0 cut off, 0 failed, 2 error rows" in capsys.readouterr().err
