"""Sweeps at scale, without Ray: a point file's footer does not grow with the sweep, compaction keeps
every row exactly once (and the exactly-once resume), a killed compaction loses nothing, and one
process at a time runs or compacts a sweep."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cluster.cli import main
from cluster.config import ConfigError
from cluster.errors import UserError
from cluster.sweep import compact as compaction
from cluster.sweep.dataset import read_dataset
from cluster.sweep.execute import job_outcome
from cluster.sweep.layout import DatasetLayout, dataset_files, is_compacted
from cluster.sweep.lock import sweep_lock
from cluster.sweep.plan import plan_from_spec, plan_sweep
from cluster.sweep.records import PointRun, Store
from cluster.sweep.runner import run_sweep
from cluster.sweep.spec import parse_spec
from tests.paths import ROOT


def _plan(command: str, base: dict, axes: dict, **sweep):
    spec, issues = parse_spec({"sweep": {"name": "s", "command": command, **sweep}, "base": base, "axes": axes},
                              Path("."))
    return plan_from_spec(spec, issues)


def _footer(plan, index: int, root: Path) -> int:
    """The footer bytes of point ``index``'s result file as the sweep's store writes it."""
    store = Store(plan, DatasetLayout(root, plan.spec.name, plan.spec.partition_by, plan.command.result))
    point = plan.points[index]
    o = job_outcome(plan.command.name, point.config, "n")
    store.write(point, o.tables, PointRun(o.status, 1, o.node, o.seconds, o.error, o.traceback))
    return pq.read_metadata(store.path(point)).serialized_size


@pytest.mark.parametrize("command,base,axis,limit", [
    ("noop", {}, "noop.value", 2048),
    ("noc", {"noc": {"k": 4, "warmup_cycles": 50, "measure_cycles": 100}}, "noc.rate", None),
])
def test_a_point_file_s_footer_is_the_same_at_10_and_at_10000_points(tmp_path, command, base, axis, limit):
    """Before: the whole spec in every file (twice), 9.4 KB a footer at 200 points and 33 KB at 2,000."""
    values = [round(0.001 + i * 1e-5, 6) for i in range(10_000)]
    small, large = _plan(command, base, {axis: values[:10]}), _plan(command, base, {axis: values})
    for i in (0, 9):  # the same point in both sweeps: the same footer, byte for byte
        assert _footer(small, i, tmp_path / "small") == _footer(large, i, tmp_path / "large")
    if limit:
        assert _footer(large, 9_999, tmp_path / "large") <= limit


NOC_SPEC = """
[sweep]
name = "g"
command = "noc"
partition_by = ["noc.traffic"]
compact = "never"
[base]
noc.rows = 4
noc.warmup_cycles = 50
noc.measure_cycles = 100
noc.rates = [0.1, 0.2]
[axes]
noc.traffic = ["uniform", "transpose"]
run.seed = [1, 2, 3]
noc.cols = [4, 8]
"""


def _noc_sweep(tmp: Path) -> tuple[Path, Path]:
    """12 points of 2 rows each (2 loads); the 3 transposes on a 4 x 8 grid fail (not square): one error row each."""
    spec = tmp / "g.toml"
    spec.write_text(textwrap.dedent(NOC_SPEC))
    out = tmp / "out"
    summary = run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)
    assert (summary.computed, summary.failed) == (12, 3)
    return spec, out


def _tables(out: Path) -> dict[str, list[dict]]:
    """Every table's rows, in a fixed order."""
    return {t: sorted(read_dataset(out / "g", table=t).to_pylist(), key=lambda r: json.dumps(r, default=str))
            for t in ("noc_summary", "noc_links")}


def _files(out: Path, table: str) -> list[Path]:
    return dataset_files(out / "g" / table)


def test_compaction_keeps_every_row_once_and_a_rerun_computes_nothing(tmp_path, capsys):
    spec, out = _noc_sweep(tmp_path)
    before = _tables(out)
    assert len(before["noc_summary"]) == 9 * 2 + 3 and len(_files(out, "noc_summary")) == 12
    assert main(["sweep", "compact", str(out), "--rows", "5", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["replaced"] == 12 + 9 and got["written"] > 2  # 9 points ran: their links too
    assert _tables(out) == before
    for table in ("noc_summary", "noc_links"):
        files = _files(out, table)
        assert files and all(is_compacted(f) for f in files)
        ids = [set(pq.read_table(f, columns=["point_id"]).column(0).to_pylist()) for f in files]
        for f, points in zip(files, ids):  # at most 5 rows, or one point with more (96 links x loads)
            assert pq.read_metadata(f).num_rows <= 5 or len(points) == 1
            assert f.parent.name in ("noc_traffic=uniform", "noc_traffic=transpose")  # partitions kept
        assert sum(map(len, ids)) == len(set().union(*ids))  # a point's rows in one file
    again = run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)
    assert (again.skipped, again.computed) == (12, 0) and _tables(out) == before
    assert main(["sweep", "status", str(out), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["done"], status["failed"], status["pending"], status["stray"]) == (9, 3, 0, 0)
    # compacting again merges the small files; nothing changes in the rows
    assert main(["sweep", "compact", str(out), "--quiet"]) == 0
    assert _tables(out) == before and len(_files(out, "noc_summary")) == 2  # one per partition


def test_retrying_failed_points_after_compaction_leaves_each_row_once(tmp_path):
    spec, out = _noc_sweep(tmp_path)
    compaction.compact(out, rows=4)
    retried = run_sweep(plan_sweep(spec), out, quiet=True, in_process=True, retry_failed=True)
    assert (retried.skipped, retried.computed, retried.failed) == (9, 3, 3)
    rows = read_dataset(out / "g").to_pylist()
    assert len(rows) == 9 * 2 + 3 and len({(r["point_id"], r["rate"]) for r in rows}) == len(rows)
    assert sum(r["point_status"] == "error" for r in rows) == 3  # the error rows, once each


def test_a_sweep_compacts_itself_when_its_run_finishes_as_configured(tmp_path):
    axes = {"noop.value": [float(i) for i in range(12)]}
    for when, compacted in (("never", False), ("auto", False), ("always", True)):  # auto: from 1,000 files
        out = tmp_path / when
        summary = run_sweep(_plan("noop", {}, axes, compact=when), out, quiet=True, in_process=True)
        files = dataset_files(out / "s" / "sweep_noop")
        assert (summary.compaction is not None) == compacted
        assert len(files) == (1 if compacted else 12) and read_dataset(out / "s").num_rows == 12
    summary = run_sweep(_plan("noop", {}, axes, compact="auto"), tmp_path / "cli", quiet=True, in_process=True,
                        compact="always")  # the command line's word over the spec's
    assert summary.compaction is not None and summary.compaction.written == 1


def test_bad_compaction_settings_and_places_are_named(tmp_path, capsys):
    with pytest.raises(ConfigError) as info:
        _plan("noop", {}, {"noop.value": [1.0]}, compact="sometimes")
    assert "sweep.compact" in str(info.value) and "always" in str(info.value)
    assert main(["sweep", "compact", str(tmp_path), "--rows", "0"]) == 2
    assert "--rows must be at least 1" in capsys.readouterr().err
    assert main(["sweep", "compact", str(tmp_path)]) == 2
    assert "no sweep at" in capsys.readouterr().err


NOOP_SPEC = """
[sweep]
name = "k"
command = "noop"
partition_by = ["noop.fail"]
compact = "never"
[axes]
noop.fail = [false, true]
noop.value = [{values}]
"""


def _noop_sweep(tmp: Path, points: int) -> tuple[Path, Path]:
    spec = tmp / "k.toml"
    spec.write_text(textwrap.dedent(NOOP_SPEC).format(values=", ".join(f"{i}.5" for i in range(points // 2))))
    out = tmp / "out"
    run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)
    return spec, out


def _point_ids(out: Path) -> list[str]:
    """Every stored row's point id, as a reader of the visible files sees them (a noop point is one row)."""
    return read_dataset(out / "k").column("point_id").to_pylist()


def compact_killed_midway(out: Path, rows: int) -> None:
    """Start `rdasim sweep compact` and SIGKILL it once its first compacted file is in place."""
    proc = subprocess.Popen([sys.executable, "-m", "cluster.cli", "sweep", "compact", str(out), "--rows", str(rows),
                             "--quiet"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 120
        while not any(is_compacted(f) for f in out.rglob("compact-*.parquet")):
            assert proc.poll() is None, "the compaction ended before a file of it was seen"
            assert time.monotonic() < deadline
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()


def test_a_killed_compaction_loses_nothing_and_shows_no_row_twice(tmp_path, capsys):
    spec, out = _noop_sweep(tmp_path, 400)
    every = sorted(_point_ids(out))
    compact_killed_midway(out, rows=3)
    files = dataset_files(out / "k" / "sweep_noop")
    assert any(is_compacted(f) for f in files) and not all(is_compacted(f) for f in files), "not killed mid-way"
    seen = _point_ids(out)
    assert len(seen) == len(set(seen)) and set(seen) <= set(every)  # never a row twice
    assert main(["sweep", "status", str(out), "--json"]) == 0  # the files, staged ones included, hold every point
    status = json.loads(capsys.readouterr().out)
    assert (status["done"] + status["failed"], status["pending"]) == (400, 0)
    rerun = run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)  # finishes the compaction, runs nothing
    assert rerun.computed == 0 and sorted(_point_ids(out)) == every
    assert not list((out / "k").rglob(".*"))  # nothing staged or temporary is left


def test_a_compaction_killed_between_its_steps_is_finished_by_the_next_one(tmp_path):
    """The window a kill can hit: the new file staged (complete, hidden), some of the files it replaces
    deleted. Readers read the staged file in place of what it replaces: every point once (a glob misses
    the 4, tests/faults/test_compaction_read.py); the next compaction finishes it."""
    _, out = _noop_sweep(tmp_path, 20)
    every = sorted(_point_ids(out))
    leaf = out / "k" / "sweep_noop" / "sweep_id=k" / "noop_fail=false"
    files = sorted(leaf.glob("*.parquet"))
    final = leaf / "compact-0123456789abcdef.sweep_noop.parquet"
    compaction._write(pa.concat_tables([pq.read_table(f) for f in files]), compaction.staged_path(final), [])
    for f in files[:4]:  # killed after deleting 4 of the 10 files it replaces
        f.unlink()
    seen = _point_ids(out)
    assert sorted(seen) == every
    done = compaction.compact(out, rows=1_000)[0]
    assert done.finished == 1 and sorted(_point_ids(out)) == every


def test_one_process_at_a_time_runs_or_compacts_a_sweep(tmp_path):
    spec, out = _noop_sweep(tmp_path, 4)
    layout = DatasetLayout(out, "k")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from pathlib import Path
        from cluster.sweep.layout import DatasetLayout
        from cluster.sweep.lock import sweep_lock
        with sweep_lock(DatasetLayout(Path({str(out)!r}), "k"), "running"):
            print("held", flush=True)
            time.sleep(120)
        """)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UserError, match=rf"busy: process {holder.pid} on .* has been running it since"):
            compaction.compact(out)
        with pytest.raises(UserError, match="busy"):
            run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)
    finally:
        holder.kill()  # SIGKILL: the kernel releases its lock
        holder.wait()
    with sweep_lock(layout, "compacting"):
        pass
    assert run_sweep(plan_sweep(spec), out, quiet=True, in_process=True).skipped == 4
