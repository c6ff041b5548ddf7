"""A run into an --out holding another run's tables: refused (exit 2, one line) unless --replace or --add,
the same for rdasim noc, run and map; --replace leaves no stale table, --add keeps every run apart by run_id."""

import json
import time

import pytest

from cluster.cli import main
from cluster.results.layout import stored_tables
from cluster.results.reading import read_table
from tests.paths import EXAMPLES

NOC = ["noc", "--k", "4", "--rate", "0.1", "--set", "noc.warmup_cycles=100", "--set", "noc.measure_cycles=200",
       "--quiet"]
SECOND = {
    "noc": NOC,
    "run": ["run", str(EXAMPLES / "race.toml"), "--quiet"],
    "map": ["map", "--preset", "gpt3-1t-sn30", "--quiet"],
}


@pytest.fixture
def noc_out(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*NOC, "--out", str(out)]) == 0
    capsys.readouterr()
    return out


def _snapshot(out):
    return {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}


@pytest.mark.parametrize("command", list(SECOND))
def test_a_reused_out_is_refused_before_any_work(noc_out, command, capsys):
    before = _snapshot(noc_out)
    (run_id,) = stored_tables(noc_out)["noc_summary"]
    start = time.perf_counter()
    assert main([*SECOND[command], "--out", str(noc_out)]) == 2
    assert time.perf_counter() - start < 5  # refused before simulating or solving
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(noc_out) in err and "noc_links, noc_summary" in err and run_id in err, err
    assert "--replace" in err and "--add" in err
    assert _snapshot(noc_out) == before  # nothing written, nothing removed


def test_replace_leaves_only_the_new_run_s_tables(noc_out, capsys):
    """The issue's case: run B into run A's directory kept A's other tables beside B's summary."""
    (noc_out / "memory_map_10.txt").write_text("an older run's map")
    (noc_out / "notes.txt").write_text("the user's own file")
    assert main([*SECOND["run"], "--out", str(noc_out), "--replace"]) == 0
    assert sorted(stored_tables(noc_out)) == ["run_buffers", "run_energy", "run_links", "run_mu_series",
                                              "run_summary"]
    record = json.loads((noc_out / "run.json").read_text())
    assert record["summary"]["workload"] == "race"
    assert not (noc_out / "memory_map_10.txt").exists() and (noc_out / "notes.txt").exists()


def test_add_accumulates_runs_partitioned_by_run_id(noc_out, capsys):
    first = json.loads((noc_out / "run.json").read_text())
    assert main([*NOC, "--set", "noc.vcs=2", "--out", str(noc_out), "--add"]) == 0
    ids = stored_tables(noc_out)["noc_summary"]
    assert len(ids) == 2 and first["run_id"] in ids
    rows = read_table(noc_out, "noc_summary").to_pylist()
    assert sorted(r["run_id"] for r in rows) == sorted(ids) and sorted(r["vcs"] for r in rows) == [2, 4]
    (second,) = set(ids) - {first["run_id"]}
    added = json.loads((noc_out / "runs" / second / "run.json").read_text())  # its side file, beside the first's
    assert added["config"]["noc"]["vcs"] == 2 and json.loads((noc_out / "run.json").read_text()) == first
    assert {r["run_id"] for r in read_table(noc_out, "noc_links").to_pylist()} == set(ids)


def test_add_and_replace_together_is_a_usage_error(noc_out, capsys):
    for argv in ([*NOC, "--out", str(noc_out)], ["sweep", str(EXAMPLES / "sweep_noc.toml"), "--out", str(noc_out)]):
        assert main([*argv, "--add", "--replace"]) == 2
        assert "give --add or --replace, not both" in capsys.readouterr().err


def test_an_older_flat_run_counts_as_another_run(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "run_summary.parquet").write_bytes(b"PAR1")
    assert main([*NOC, "--out", str(out)]) == 2
    assert "run_summary" in capsys.readouterr().err
    assert main([*NOC, "--out", str(out), "--replace"]) == 0
    assert not (out / "run_summary.parquet").exists() and sorted(stored_tables(out)) == ["noc_links", "noc_summary"]
