"""Systems from the command line and in sweeps: array-of-table keys set by index, a sweep of
systems whose zipped keys move together, and the errors that name what is wrong."""

import json
import textwrap

import pytest

from cluster.cli import main
from cluster.sweep.dataset import read_dataset
from cluster.sweep.plan import plan_sweep
from cluster.sweep.runner import run_sweep
from tests.paths import EXAMPLES

MOE = str(EXAMPLES / "system_moe_alltoall.toml")


def _run_json(capsys, *sets) -> dict:
    argv = ["run", MOE, "--json", "--quiet", "--set", "workload.experts.steps=2"]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_a_key_inside_an_array_of_tables_is_set_by_index(capsys):
    slow = _run_json(capsys, "system.network[0].link_bandwidth=16GB/s", "workload.experts.skew=0")
    fast = _run_json(capsys, "system.network[0].link_bandwidth=256GB/s", "workload.experts.skew=0")
    assert slow["status"] == fast["status"] == "completed"
    assert slow["bytes_total"] == fast["bytes_total"]
    # the all-to-alls' serialisation scales with 1 / bandwidth; the experts' compute does not
    gap = slow["balanced_step_cycles"] - fast["balanced_step_cycles"]
    pieces = 2 * 7 * (512 * 2 // 8 * 4096 * 2)  # two all-to-alls of 7 pieces, 128 tokens of 8 KiB each
    assert gap == pytest.approx(pieces * (1.25e9 / 16e9 - 1.25e9 / 256e9), abs=2 * 14)


def test_an_index_past_the_array_is_a_one_line_error(capsys):
    assert main(["run", MOE, "--set", "system.network[2].size=4"]) == 2
    err = capsys.readouterr().err
    assert "system.network[2].size" in err and "network has 1 table(s)" in err and "Traceback" not in err


def _sweep(tmp_path, name: str, body: str):
    spec = tmp_path / f"{name}.toml"
    spec.write_text(f'base = "{MOE}"\n' + textwrap.dedent(body))
    summary = run_sweep(plan_sweep(spec), tmp_path / "out", quiet=True, in_process=True)
    return summary, read_dataset(tmp_path / "out" / name).to_pylist()


def test_a_sweep_of_systems_moves_zipped_keys_together(tmp_path):
    summary, rows = _sweep(tmp_path, "systems", """
        [sweep]
        name = "systems"
        command = "system"
        [axes]
        workload.experts.steps = [1]
        [[zip]]
        system.chips = [2, 4]
        "system.network[0].size" = [2, 4]
    """)
    assert (summary.computed, summary.failed) == (2, 0)
    assert sorted((r["chips"], r["system_network_0_size"], r["status"]) for r in rows) == [
        (2, 2, "completed"), (4, 4, "completed")]


def test_a_run_sweep_over_a_system_points_to_the_system_command(tmp_path):
    summary, rows = _sweep(tmp_path, "wrong", """
        [sweep]
        name = "wrong"
        command = "run"
        [axes]
        workload.experts.skew = [0.0, 1.0]
    """)
    assert summary.failed == 2
    errors = {r["point_error"] for r in rows}
    assert len(errors) == 1 and 'use command = "system"' in errors.pop()


def test_report_panels_leave_out_a_key_zipped_with_the_x_axis():
    from cluster.report.sweep_figures import _facets

    rows = [{"chips": c, "size": c, "bw": b} for c in (4, 8) for b in (1, 2)]
    assert _facets(rows, ["chips", "size", "bw"], ("chips", None)) == ["bw"]
    assert _facets(rows, ["chips", "size", "bw"], ("bw", None)) == ["chips", "size"]


def test_decode_with_tp_over_grid_chips_completes_under_virtual_and_says_why_realloc_copy_deadlocks(capsys):
    """The KV caches grow in each chip's MUs: block by block they fit; copied on growth they do not
    (as on one chip), and the system's status names the chip and what its units wait on."""
    toml = str(EXAMPLES / "system_decode_tp.toml")
    assert main(["run", toml, "--json", "--quiet"]) == 0
    ok = json.loads(capsys.readouterr().out)
    assert ok["status"] == "completed" and ok["chips"] == 2 and ok["bytes_total"] > 0
    assert main(["run", toml, "--json", "--quiet", "--set", "memory.policy=realloc-copy"]) == 4
    stuck = json.loads(capsys.readouterr().out)
    assert stuck["status"] == "deadlocked"
    assert "chip 0:" in stuck["status_detail"] and "stalled out of memory" in stuck["status_detail"]
