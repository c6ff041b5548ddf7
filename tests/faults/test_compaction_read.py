"""A compaction SIGKILLed at chosen points of its deletes (its own process, the real code):
``rdasim.read`` and a sweep's dataset reader return every row exactly once at each point, and
say a compaction is half done; a plain glob misses the points moved (docs/sweeps.md says not
to use one while a compaction may be interrupted)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import rdasim
from cluster.report.sources import SweepTables
from cluster.results.layout import open_files
from cluster.sweep.dataset import read_dataset
from cluster.sweep.layout import COMPACTED, STAGED
from cluster.sweep.reading import read_consistently
from tests.faults.conftest import ROOT, in_process
from tests.faults.sweeps import noop_spec, point_files

POINTS = 8
# the compaction in a child process, SIGKILLed once it has deleted ``at`` files (at the latest, as it is
# about to rename its staged file into place)
KILLED = """
import os, signal, sys, threading
from cluster.sweep import compact
at, lock, done = int(sys.argv[2]), threading.Lock(), [0]
unlink, replace = os.unlink, os.replace
def unlinking(path):
    with lock:
        if done[0] == at:
            os.kill(os.getpid(), signal.SIGKILL)
        unlink(path)
        done[0] += 1
def replacing(src, dst):
    if str(src).endswith(".staged"):
        os.kill(os.getpid(), signal.SIGKILL)
    replace(src, dst)
os.unlink, os.replace = unlinking, replacing
compact.compact(sys.argv[1])
"""


def _compact_killed(out, at: int) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", KILLED, str(out), str(at)], env=env, capture_output=True,
                          text=True, timeout=120)
    return done.returncode


def _values(table) -> list[int]:
    return sorted(table.column("value").to_pylist())


@pytest.mark.parametrize("at", [0, 1, POINTS // 2, POINTS])
def test_a_reader_sees_every_row_once_wherever_compaction_was_killed(tmp_path, capsys, at):
    out = tmp_path / "out"
    spec = noop_spec(tmp_path, values=range(1, POINTS + 1))
    assert in_process("sweep", spec, "--out", out, "--in-process", "--quiet", "--compact", "never").returncode == 0
    before = len(point_files(out))
    assert before == POINTS
    assert _compact_killed(out, at) == -signal.SIGKILL
    staged = list((out / "n").rglob(f".*{STAGED}"))
    left = [f for f in point_files(out) if not f.name.startswith(COMPACTED)]
    assert len(staged) == 1 and len(left) == POINTS - at  # killed between staging and putting in place
    # a glob sees the gap: the points whose files went are only in the hidden staged file
    glob = ds.dataset([str(f) for f in out.glob("**/*.sweep_noop.parquet")], format="parquet").to_table()
    assert glob.num_rows == POINTS - at
    capsys.readouterr()
    # the readers read the staged file in place of what it replaces: every row once, and say so
    assert _values(rdasim.read(out, "sweep_noop")) == list(range(1, POINTS + 1))
    assert "a compaction was interrupted (or is running)" in capsys.readouterr().err
    assert _values(read_dataset(out / "n")) == list(range(1, POINTS + 1))
    assert "read its 1 staged file(s) in place of the files they replace" in capsys.readouterr().err
    # nothing was changed by reading; the next sweep command finishes it, and then no warning
    assert len([f for f in point_files(out) if not f.name.startswith(COMPACTED)]) == POINTS - at
    assert "finished an interrupted compaction first" in in_process("sweep", "status", out).stdout
    assert _values(rdasim.read(out, "sweep_noop")) == list(range(1, POINTS + 1))
    assert capsys.readouterr().err == ""


def test_a_merge_killed_reads_the_staged_file_in_place_of_the_compacted_files_it_replaces(tmp_path, capsys):
    out = tmp_path / "out"
    spec = noop_spec(tmp_path, values=range(1, POINTS + 1))
    assert in_process("sweep", spec, "--out", out, "--in-process", "--quiet", "--compact", "never").returncode == 0
    assert in_process("sweep", "compact", out, "--rows", "3").returncode == 0  # 8 rows in files of up to 3
    small = [f for f in point_files(out) if f.name.startswith(COMPACTED)]
    assert len(small) == 3
    assert _compact_killed(out, 1) == -signal.SIGKILL  # merging them: one of three deleted
    assert len([f for f in point_files(out)]) == 2 and list((out / "n").rglob(f".*{STAGED}"))
    capsys.readouterr()
    assert _values(rdasim.read(out, "sweep_noop")) == list(range(1, POINTS + 1))
    assert "compaction was interrupted" in capsys.readouterr().err


def test_a_report_reads_each_point_of_a_killed_compaction_once(tmp_path):
    """report reads a sweep's other tables a point at a time: the staged file stands in for the point files gone."""
    out = tmp_path / "out"
    spec = noop_spec(tmp_path, values=range(1, POINTS + 1))
    assert in_process("sweep", spec, "--out", out, "--in-process", "--quiet", "--compact", "never").returncode == 0
    ids = {f.name.split(".")[0] for f in point_files(out)}
    assert _compact_killed(out, POINTS // 2) == -signal.SIGKILL
    tables = SweepTables("n", "noop", ["noop_value"], read_dataset(out / "n"), dirs={"t": out / "n" / "sweep_noop"})
    for pid in ids:
        rows = tables.point_tables(pid)["t"]
        assert rows.column("point_id").to_pylist() == [pid]


def test_a_file_a_running_compaction_moves_away_is_listed_again(tmp_path):
    """Between listing and reading, a running compaction may delete a listed point file: the reader lists again."""
    a, b = tmp_path / "a.sweep_noop.parquet", tmp_path / "b.sweep_noop.parquet"
    pq.write_table(pa.table({"point_id": ["a"]}), a)
    pq.write_table(pa.table({"point_id": ["b"]}), b)
    listings = iter([[a, tmp_path / "gone.sweep_noop.parquet"], [a, b]])
    got = read_consistently(lambda: next(listings), list, lambda view: open_files(view.files).to_table())
    assert sorted(got.column("point_id").to_pylist()) == ["a", "b"]
