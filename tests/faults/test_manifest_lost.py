"""A lost manifest does not skip the spec check: the point files name their spec version, and a rerun of a
changed spec into the same directory is refused without --add or --replace."""

from __future__ import annotations

from tests.faults.conftest import in_process, one_line_error
from tests.faults.sweeps import noop_spec, point_files


def test_a_changed_spec_is_refused_from_the_point_files_when_the_manifest_is_gone(tmp_path):
    out = tmp_path / "out"
    first = noop_spec(tmp_path, values=range(1, 5))
    assert in_process("sweep", first, "--out", out, "--in-process", "--quiet", "--compact", "never").returncode == 0
    (out / "_n.manifest.json").unlink()
    changed = noop_spec(tmp_path, values=range(1, 6), file="changed.toml")  # another axis value: another version
    err = one_line_error(in_process("sweep", changed, "--out", out, "--in-process", "--quiet"))
    assert "sweep 'n' in " in err and "has no manifest but holds points of another spec version" in err
    assert len(point_files(out)) == 4  # nothing mixed in
    rerun = in_process("sweep", first, "--out", out, "--in-process", "--quiet")  # the same spec: continued
    assert rerun.returncode == 0 and len(point_files(out)) == 4
    assert in_process("sweep", changed, "--out", out, "--in-process", "--quiet", "--add").returncode == 0


def test_a_changed_spec_is_refused_from_compacted_files_when_the_manifest_is_gone(tmp_path):
    out = tmp_path / "out"
    first = noop_spec(tmp_path, values=range(1, 5))
    assert in_process("sweep", first, "--out", out, "--in-process", "--quiet", "--compact", "always").returncode == 0
    (out / "_n.manifest.json").unlink()
    changed = noop_spec(tmp_path, values=range(1, 6), file="changed.toml")
    err = one_line_error(in_process("sweep", changed, "--out", out, "--in-process", "--quiet"))
    assert "has no manifest but holds points of another spec version" in err
