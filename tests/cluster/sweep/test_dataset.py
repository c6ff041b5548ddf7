"""The stored dataset, without Ray (--in-process): one atomic file per point, typed columns,
error rows, resuming without recomputation, and status read from the files."""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from cluster.cli import main
from cluster.config import config_hash, load
from cluster.config.noc import NOC_SCHEMA
from cluster.sweep.dataset import read_dataset
from cluster.sweep.layout import point_of, segment_value
from cluster.sweep.plan import plan_sweep
from cluster.sweep.runner import run_sweep
from tests.paths import ROOT

NOC_SPEC = """
[sweep]
name = "grid"
command = "noc"
partition_by = ["noc.cols", "noc.traffic"]

[base]
noc.rows = 4
noc.warmup_cycles = 100
noc.measure_cycles = 200

[axes]
noc.cols = [4, 8]
noc.traffic = ["uniform", "transpose"]
noc.rate = [0.1, 0.3]
"""


def _spec(path, text):
    path.write_text(textwrap.dedent(text))
    return path


def _files(root):
    return sorted(root.rglob("*.parquet"))


def _given(row) -> dict:
    """The [noc] keys NOC_SPEC sets for the point of ``row``."""
    return {"rows": 4, "warmup_cycles": 100, "measure_cycles": 200, "cols": row["noc_cols"],
            "traffic": row["noc_traffic"], "rate": row["noc_rate"]}


def _identity_of(row) -> tuple[str, str]:
    """(point id, config hash) the point of ``row`` must carry: the hash of the keys it sets away from their
    schema defaults, and `rdasim noc`'s hash of its whole resolved config."""
    defaults = NOC_SCHEMA.fields["noc"].fields
    asked = {k: v for k, v in _given(row).items() if v != defaults[k].default}
    return config_hash({"noc": asked}), config_hash(load(NOC_SCHEMA, raw={"noc": _given(row)}))


@pytest.fixture(scope="module")
def noc_sweep(tmp_path_factory):
    """8 NoC points; the 2 transposes on a 4x8 grid fail by themselves (not square)."""
    tmp = tmp_path_factory.mktemp("noc")
    spec = _spec(tmp / "spec.toml", NOC_SPEC)
    summary = run_sweep(plan_sweep(spec), tmp / "out", quiet=True, in_process=True)
    return tmp, summary


def test_one_file_per_point_at_its_hive_path(noc_sweep):
    tmp, summary = noc_sweep
    files = _files(tmp / "out" / "grid" / "noc_summary")
    assert summary.total == 8 and summary.computed == 8 and len(files) == 8
    plan = plan_sweep(tmp / "spec.toml")
    expected = {f"sweep_id=grid/noc_cols={p.config['noc']['cols']}/noc_traffic={p.config['noc']['traffic']}/"
                f"{p.id}.noc_summary.parquet" for p in plan.points}
    assert {str(f.relative_to(tmp / "out" / "grid" / "noc_summary")) for f in files} == expected
    assert len(_files(tmp / "out" / "grid" / "noc_links")) == 6  # links of the points that ran
    assert not list((tmp / "out").rglob("*.tmp"))


def test_columns_keep_their_types_through_pyarrow(noc_sweep):
    tmp, _ = noc_sweep
    table = ds.dataset(tmp / "out" / "grid" / "noc_summary", format="parquet").to_table()
    types = {f.name: f.type for f in table.schema}
    assert types["noc_cols"] == pa.int64() and types["noc_rate"] == pa.float64()
    assert types["noc_traffic"] == pa.string() and types["sweep_id"] == pa.string()
    assert types["avg_latency"] == pa.float64() and types["measured_packets"] == pa.int64()
    assert types["saturated"] == pa.bool_() and types["point_attempts"] == pa.int32()
    assert table.num_rows == 8
    assert read_dataset(tmp / "out" / "grid" / "noc_summary").schema.equals(table.schema)
    # partition values in the files equal the directory values, as numbers
    for f in _files(tmp / "out" / "grid" / "noc_summary"):
        row = pq.read_table(f).to_pylist()[0]
        assert f"noc_cols={row['noc_cols']}/" in str(f) and isinstance(row["noc_cols"], int)


def test_ok_rows_carry_the_point_identity_and_file_metadata(noc_sweep):
    tmp, _ = noc_sweep
    ok = read_dataset(tmp / "out" / "grid" / "noc_summary", filter=ds.field("point_status") == "ok").to_pylist()
    assert len(ok) == 6
    for row in ok:
        assert (row["point_id"], row["config_hash"]) == _identity_of(row)
        assert row["rate"] == row["noc_rate"] and row["cols"] == row["noc_cols"]
        assert row["measured_packets"] > 0 and row["point_error"] is None
    f = _files(tmp / "out" / "grid" / "noc_summary")[0]
    meta = pq.read_schema(f).metadata
    # the footer names the point, its status, the spec version and the code; the spec itself is in the manifest once
    assert set(meta) == {b"table", b"rdasim.version", b"rdasim.spec_hash", b"rdasim.point_id", b"rdasim.point_status"}
    assert meta[b"rdasim.point_id"].decode() == point_of(f) and meta[b"rdasim.point_status"] in (b"ok", b"error")
    manifest = json.loads((tmp / "out" / "_grid.manifest.json").read_text())
    assert [v["hash"] for v in manifest["specs"]] == [meta[b"rdasim.spec_hash"].decode()]
    assert manifest["spec"]["sweep"]["name"] == "grid" and manifest["spec"]["base"]["noc"]["rows"] == 4
    assert set(manifest["column_docs"]) == set(pq.read_schema(f).names)  # every column described, once
    assert manifest["column_docs"]["noc_rate"] == "the point's value of the swept config key noc.rate"


def test_a_failing_point_is_an_error_row_not_a_crash(noc_sweep):
    tmp, summary = noc_sweep
    assert summary.failed == 2
    bad = read_dataset(tmp / "out" / "grid" / "noc_summary", filter=ds.field("point_status") == "error").to_pylist()
    assert sorted((r["noc_traffic"], r["noc_cols"]) for r in bad) == [("transpose", 8), ("transpose", 8)]
    for row in bad:
        assert "square grid" in row["point_error"] and "Traceback" in row["point_traceback"]
        assert row["avg_latency"] is None and (row["point_id"], row["config_hash"]) == _identity_of(row)


def test_status_counts_from_the_files(noc_sweep, capsys):
    tmp, _ = noc_sweep
    for where in (tmp / "out", tmp / "out" / "grid"):
        assert main(["sweep", "status", str(where), "--json"]) == 0
        got = json.loads(capsys.readouterr().out)
        assert (got["done"], got["failed"], got["pending"], got["total"]) == (6, 2, 0, 8)
        assert got["state"] == "finished"


NOOP_SPEC = """
[sweep]
name = "n"
command = "noop"
partition_by = ["noop.value"]
[axes]
noop.value = [0.5, 1.5, 2.5, 3.5, 4.5]
noop.fail = [false, true]
"""


def _stamp(files):
    return {f: (f.stat().st_ino, f.stat().st_mtime_ns) for f in files}


def test_rerun_skips_stored_points_and_recomputes_only_what_is_missing(tmp_path, capsys):
    spec = _spec(tmp_path / "n.toml", NOOP_SPEC)
    out = tmp_path / "out"
    first = run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)
    assert (first.computed, first.failed) == (10, 5)
    files = _files(out / "n")
    before = _stamp(files)
    again = run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)
    assert (again.skipped, again.computed) == (10, 0) and _stamp(files) == before
    # a lost file and a truncated one are recomputed; nothing else is touched
    ok = [f for f in files if pq.read_schema(f).metadata[b"rdasim.point_status"] == b"ok"]
    ok[0].unlink()
    ok[1].write_bytes(ok[1].read_bytes()[:100])
    assert main(["sweep", "status", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pending"] == 2
    third = run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)
    assert third.computed == 2
    assert {f: s for f, s in _stamp(_files(out / "n")).items() if f not in ok[:2]} == \
        {f: s for f, s in before.items() if f not in ok[:2]}
    assert len(_files(out / "n")) == 10
    # --retry-failed reruns exactly the error rows
    retried = run_sweep(plan_sweep(spec), out, quiet=True, in_process=True, retry_failed=True)
    assert retried.computed == 5 and len(_files(out / "n")) == 10
    runs = json.loads((out / "_n.manifest.json").read_text())["runs"]
    assert [(r["to_run"], r["computed"], r["state"]) for r in runs] == \
        [(10, 10, "finished"), (0, 0, "finished"), (2, 2, "finished"), (5, 5, "finished")]


def test_orphaned_temporary_files_are_removed_but_fresh_ones_kept(tmp_path):
    spec = _spec(tmp_path / "n.toml", NOOP_SPEC)
    out = tmp_path / "out"
    run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)
    part = next((out / "n").rglob("noop_value=*"))
    old, fresh = part / ".x.parquet.abc.tmp", part / ".y.parquet.def.tmp"
    old.write_bytes(b"half a file")
    fresh.write_bytes(b"being written")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)
    assert not old.exists() and fresh.exists()


def test_a_killed_writers_temporary_file_goes_at_once_a_live_ones_stays(tmp_path):
    from cluster.results.io import _host, atomic_path

    spec = _spec(tmp_path / "n.toml", NOOP_SPEC)
    out = tmp_path / "out"
    run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)
    part = next((out / "n").rglob("noop_value=*"))
    # a writer killed mid-write (a sweep driver on SIGKILL): its process is gone
    writer = subprocess.Popen([sys.executable, "-c", "import os, sys, time\n"
                               "sys.path.insert(0, os.getcwd())\n"
                               "from cluster.results.io import atomic_path\n"
                               f"with atomic_path({str(part / 'z.parquet')!r}) as t:\n"
                               "    t.write_bytes(b'half'); print(t, flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
    killed = Path(writer.stdout.readline().strip())
    writer.kill()
    writer.wait()
    assert killed.exists() and f"{_host()}_{writer.pid}." in killed.name
    elsewhere = part / f".w.parquet.otherhost_{os.getpid()}.abcd1234.tmp"  # another host's: only age tells
    elsewhere.write_bytes(b"being written")
    with atomic_path(part / "live.parquet") as live:  # this process, writing right now
        live.write_bytes(b"being written")
        run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)
        assert not killed.exists() and live.exists() and elsewhere.exists()


def test_string_partition_values_are_escaped_and_decoded_by_readers(tmp_path):
    spec = _spec(tmp_path / "s.toml", """
        [sweep]
        name = "esc"
        command = "noop"
        partition_by = ["run.address"]
        [base]
        run.backend = "ray"
        [axes]
        run.address = ["a/b c", "ray://h:1"]
    """)
    run_sweep(plan_sweep(spec), tmp_path / "out", quiet=True, in_process=True)
    assert segment_value("a/b c") == "a%2Fb%20c" and segment_value(None) == "__HIVE_DEFAULT_PARTITION__"
    hive = ds.dataset(tmp_path / "out" / "esc" / "sweep_noop", format="parquet",
                      partitioning=ds.partitioning(pa.schema([("sweep_id", pa.string()),
                                                              ("run_address", pa.string())]), flavor="hive"),
                      exclude_invalid_files=True)
    assert sorted(hive.to_table(columns=["run_address"]).column(0).to_pylist()) == ["a/b c", "ray://h:1"]
