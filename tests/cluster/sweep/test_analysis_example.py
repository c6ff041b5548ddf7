"""examples/analysis.py picks a metric the table has: on a `run` sweep it averages throughput,
not the NoC's avg_latency it does not have; a metric that is not there is one line naming what is."""

import json
import subprocess
import sys

import pytest

from cluster.sweep.plan import plan_sweep
from cluster.sweep.runner import run_sweep
from tests.paths import EXAMPLES, pressure_sweep

EXAMPLE = EXAMPLES / "analysis.py"


@pytest.fixture(scope="module")
def run_sweep_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("analysis")
    run_sweep(plan_sweep(pressure_sweep(tmp)), tmp / "out", quiet=True, in_process=True)
    return tmp / "out" / "kv"


def _analysis(*args):
    return subprocess.run([sys.executable, str(EXAMPLE), *map(str, args)], capture_output=True, text=True)


def test_a_run_sweep_is_averaged_over_its_throughput_by_default(run_sweep_dir):
    got = _analysis(run_sweep_dir, "--json")
    assert got.returncode == 0, got.stderr
    pyarrow = next(r for r in map(json.loads, got.stdout.splitlines()) if r["reader"] == "pyarrow")
    assert "tokens_per_second" in pyarrow["types"] and len(pyarrow["rows"]) == 2


def test_a_metric_the_table_lacks_is_one_line_naming_what_it_has(run_sweep_dir):
    got = _analysis(run_sweep_dir, "--metric", "avg_latency")
    assert got.returncode == 2
    (line,) = got.stderr.strip().splitlines()
    assert "no numeric column 'avg_latency'; try tokens_per_second" in line and len(line) < 300


def test_an_out_directory_holding_one_sweep_is_that_sweep(run_sweep_dir, tmp_path):
    got = _analysis(run_sweep_dir.parent, "--json")  # the --out directory the sweep was written to
    assert got.returncode == 0, got.stderr
    pyarrow = next(r for r in map(json.loads, got.stdout.splitlines()) if r["reader"] == "pyarrow")
    assert len(pyarrow["rows"]) == 2
    got = _analysis(tmp_path)  # no sweep there: one line, exit 2
    assert got.returncode == 2 and len(got.stderr.strip().splitlines()) == 1 and "no sweep here" in got.stderr
