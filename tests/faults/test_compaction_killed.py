"""A compaction killed after its file is staged and some point files are gone: the next command that opens the
sweep (here ``sweep status``) finishes it and says so, and every reader then sees every row once."""

from __future__ import annotations

from cluster.results.layout import read
from cluster.sweep.compact import _concat, _write
from cluster.sweep.index import read_file
from cluster.sweep.layout import COMPACTED, staged_path
from tests.faults.conftest import in_process
from tests.faults.sweeps import noop_spec, point_files


def test_status_finishes_a_compaction_killed_mid_delete_and_readers_see_every_row(tmp_path):
    out = tmp_path / "out"
    spec = noop_spec(tmp_path)
    assert in_process("sweep", spec, "--out", out, "--in-process", "--quiet", "--compact", "never").returncode == 0
    files = point_files(out)
    # the kill: the compacted file is staged whole, three of the six point files it replaces are deleted
    staged = staged_path(files[0].parent / f"{COMPACTED}0123456789abcdef.sweep_noop.parquet")
    _write(_concat([read_file(f) for f in files]), staged, [])
    for f in files[:3]:
        f.unlink()
    assert read(out, "sweep_noop").num_rows == 6  # the staged file read in place of what it replaces
    status = in_process("sweep", "status", out)
    assert status.returncode == 0 and "finished an interrupted compaction first (1 file(s) put in place)" \
        in status.stdout
    assert " 6       0        0       6" in status.stdout
    rows = read(out, "sweep_noop")
    assert sorted(rows.column("value").to_pylist()) == [1, 2, 3, 4, 5, 6]
    assert [f.name.startswith(COMPACTED) for f in point_files(out)] == [True]
