"""Corrupted and unreadable files: every reader names the file and what is wrong (exit 2, one line), a point file
cut short is its own status (pending, named, recomputed by a rerun), a full disk is one line naming the path."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.faults.conftest import in_process, one_line_error, rdasim
from tests.faults.sweeps import noop_spec, point_files

CORRUPTIONS = {
    "not text": (lambda m: m.write_bytes(b"\xff\xfe garbage"), "not UTF-8 text at byte 0"),
    "cut short": (lambda m: m.write_text(m.read_text()[:40]), "not JSON: "),
    "runs a string": (lambda m: _edit(m, runs="oops"), "'runs' is str, expected a list"),
    "no partition_by": (lambda m: _edit(m, partition_by=None), "'partition_by' is missing, expected a list"),
}


def _edit(manifest, **changes):
    data = json.loads(manifest.read_text())
    for k, v in changes.items():
        if v is None:
            del data[k]
        else:
            data[k] = v
    manifest.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A finished 6-point sweep and its spec (copied by each test before it corrupts anything)."""
    where = tmp_path_factory.mktemp("stored")
    spec = noop_spec(where)
    done = in_process("sweep", spec, "--out", where / "out", "--in-process", "--quiet", "--compact", "never")
    assert done.returncode == 0, done.stderr
    return where


def _copy(stored, tmp_path):
    shutil.copytree(stored, tmp_path, dirs_exist_ok=True)
    return tmp_path / "n.toml", tmp_path / "out"


@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_a_corrupted_manifest_is_named_by_every_command(stored, tmp_path, how):
    spec, out = _copy(stored, tmp_path)
    manifest = out / "_n.manifest.json"
    corrupt, what = CORRUPTIONS[how]
    corrupt(manifest)
    for args in (["sweep", spec, "--out", out, "--in-process", "--quiet"], ["sweep", "status", out],
                 ["report", out, "--out", tmp_path / "fig"], ["sweep", "compact", out]):
        err = one_line_error(in_process(*args))
        assert f"{manifest}: not a readable sweep manifest (" in err and what in err, (args, err)


def test_a_point_file_cut_short_is_named_pending_and_recomputed(stored, tmp_path):
    spec, out = _copy(stored, tmp_path)
    cut = point_files(out)[0]
    whole = cut.read_bytes()
    cut.write_bytes(whole[:300])
    status = in_process("sweep", "status", out)
    assert status.returncode == 0 and f"{cut}: cannot be read (not a whole Parquet file): its point is pending" \
        in status.stdout
    assert " 5       0        1       6" in status.stdout  # stored, errors, pending, total
    err = one_line_error(in_process("report", out, "--out", tmp_path / "fig"))
    assert f"{cut}: not a readable Parquet file (Parquet magic bytes not found in footer)" in err
    rerun = in_process("sweep", spec, "--out", out, "--in-process")
    assert rerun.returncode == 0 and f"{cut}: cannot be read (not a whole Parquet file): its point is recomputed" \
        in rerun.stderr and "(5 already stored, 1 run)" in rerun.stderr
    assert " 6       0        0       6" in in_process("sweep", "status", out).stdout


def test_a_compacted_file_cut_short_is_named(stored, tmp_path):
    spec, out = _copy(stored, tmp_path)
    assert in_process("sweep", "compact", out).returncode == 0
    (compacted,) = point_files(out)
    compacted.write_bytes(compacted.read_bytes()[:200])
    for args in (["sweep", "status", out], ["sweep", spec, "--out", out, "--in-process", "--quiet"]):
        err = one_line_error(in_process(*args))
        assert f"{compacted}: not a readable Parquet file (" in err


@pytest.fixture
def small_disk(tmp_path):
    """A 200 KiB tmpfs (root only): a disk that fills up part-way through a sweep."""
    where = tmp_path / "disk"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(where)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    yield where
    subprocess.run(["umount", str(where)], check=True)


def test_a_full_disk_is_one_line_naming_the_path_and_nothing_half_written(tmp_path, small_disk):
    spec = noop_spec(tmp_path, values=range(1, 61))
    done = rdasim("sweep", spec, "--out", small_disk, "--in-process", "--quiet", "--compact", "never")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {small_disk}/") and line.endswith(": cannot write: No space left on device")
    assert not list(small_disk.rglob("*.tmp"))  # each file whole or absent
    for f in point_files(small_disk):
        assert f.stat().st_size > 0
