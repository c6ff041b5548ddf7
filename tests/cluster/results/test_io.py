"""Atomic result files: a failure mid-write leaves no file and no temporary, and an existing file untouched."""

import os
import stat

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from cluster.results import io, writer

TABLE = pa.table({"x": [1, 2, 3], "name": ["a", "b", "c"]})


class Boom(Exception):
    pass


def _listing(d):
    return sorted(p.name for p in d.iterdir())


@pytest.mark.parametrize("error", [Boom, KeyboardInterrupt])
def test_a_failure_mid_write_leaves_no_file_and_no_temporary(tmp_path, error):
    target = tmp_path / "out" / "summary.parquet"
    with pytest.raises(error):
        with io.atomic_path(target) as tmp:
            tmp.write_bytes(b"PAR1 half a file")
            raise error()
    assert _listing(tmp_path / "out") == []


def test_a_failure_mid_write_leaves_the_existing_file_as_it_was(tmp_path):
    target = tmp_path / "summary.json"
    io.write_json({"old": 1}, target)
    before = target.read_bytes()
    with pytest.raises(Boom):
        with io.atomic_path(target) as tmp:
            tmp.write_text('{"new": ')
            raise Boom()
    assert target.read_bytes() == before and _listing(tmp_path) == ["summary.json"]


def test_a_writer_that_fails_leaves_nothing(tmp_path):
    loop: list = []
    loop.append(loop)  # json cannot encode a circular list
    with pytest.raises(ValueError, match="Circular"):
        io.write_json(loop, tmp_path / "a.json")
    with pytest.raises(pa.ArrowInvalid):
        writer.write_table(pa.table({"nested": [[1], [2, 3]]}), tmp_path / "b.csv", form=writer.CSV)  # CSV has no lists
    assert _listing(tmp_path) == []


def test_a_complete_write_replaces_the_file_and_reads_back(tmp_path):
    io.write_text("old", tmp_path / "t.txt")
    io.write_text("new", tmp_path / "t.txt")
    assert (tmp_path / "t.txt").read_text() == "new"
    assert pq.read_table(writer.write_table(TABLE, tmp_path / "t.parquet")).equals(TABLE)
    assert pacsv.read_csv(writer.write_table(TABLE, tmp_path / "t.csv", form=writer.CSV)).equals(TABLE)
    assert _listing(tmp_path) == ["t.csv", "t.parquet", "t.txt"]


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_a_result_file_gets_the_mode_the_umask_allows(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        assert io.umask() == mask
        path = io.write_text("x", tmp_path / "t.txt")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_bad_output_paths_are_named_with_the_reason(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    with pytest.raises(io.OutputError, match=f"--out {a_file}: '{a_file}' is a file, not a directory"):
        io.check_dir(a_file)
    with pytest.raises(io.OutputError, match="is a file, not a directory"):
        io.check_dir(a_file / "sub" / "dir")
    with pytest.raises(io.OutputError, match=f"--trace {tmp_path}: '{tmp_path}' is a directory, expected a file"):
        io.check_file(tmp_path, "--trace")
    before = _listing(tmp_path)
    checked = io.check_dir(tmp_path / "new" / "deeper")
    assert not checked.exists() and _listing(tmp_path) == before  # nothing made: the first file written makes it
    io.write_text("x", checked / "t.txt")
    assert _listing(checked) == ["t.txt"]
