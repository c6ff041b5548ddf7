"""A lost manifest does not skip the spec check: the point files name their spec version, and a rerun of a
changed spec into the same directory is refused without --add or --replace. ``status`` and ``report``
rebuild the manifest from the stored points: status counts them, report draws what it drew with it."""

from __future__ import annotations

import json
import re
import shutil

import pytest

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


@pytest.mark.parametrize("compact", ["never", "always"])
def test_status_rebuilds_a_lost_manifest_from_the_stored_points(tmp_path, compact):
    out = tmp_path / "out"
    spec = noop_spec(tmp_path, values=range(1, 6))
    other = noop_spec(tmp_path, values=[6], file="other.toml")  # another spec version of sweep n
    assert in_process("sweep", spec, "--out", out, "--in-process", "--quiet", "--compact", compact).returncode == 0
    kept = json.loads((out / "_n.manifest.json").read_text())
    (out / "_n.manifest.json").unlink()
    status = in_process("sweep", "status", out)
    assert status.returncode == 0, status.stderr
    assert re.search(r"^n +noop +5 +0 +0 +5  rebuilt$", status.stdout, re.M), status.stdout
    assert "its manifest was lost: rebuilt _n.manifest.json from the 5 stored points" in status.stdout
    rebuilt = json.loads((out / "_n.manifest.json").read_text())
    # every stored point with its index, status and spec version, as the lost manifest had them
    assert {p: (e["index"], e["status"], e["specs"]) for p, e in rebuilt["points"].items()} == \
        {p: (e["index"], e["status"], e["specs"]) for p, e in kept["points"].items()}
    assert in_process("sweep", "status", out).stdout.count("rebuilt") == 1  # the state; said once, when rebuilt
    # the spec check holds: another version is refused, the same one continues and restores the spec's text
    assert "holds points of another spec version" in one_line_error(
        in_process("sweep", other, "--out", out, "--in-process", "--quiet"))
    assert in_process("sweep", spec, "--out", out, "--in-process", "--quiet").returncode == 0
    after = json.loads((out / "_n.manifest.json").read_text())
    assert [s["text"] for s in after["specs"]] == [s["text"] for s in kept["specs"]]
    assert re.search(r"^n +noop +5 +0 +0 +5  finished$", in_process("sweep", "status", out).stdout, re.M)


def test_report_draws_a_sweep_whose_manifest_was_lost_as_it_did_with_it(tmp_path):
    out = tmp_path / "out"
    spec = noop_spec(tmp_path, values=range(1, 6))
    assert in_process("sweep", spec, "--out", out, "--in-process", "--quiet", "--compact", "never").returncode == 0
    with_manifest = tmp_path / "with"
    shutil.copytree(out, with_manifest)
    (out / "_n.manifest.json").unlink()
    drawn = {}
    for where in (with_manifest, out):
        done = in_process("report", where)
        assert done.returncode == 0, done.stderr
        drawn[where] = sorted(p.name for p in (where / "_figures").glob("*.png"))
    assert drawn[out] == drawn[with_manifest] and drawn[out], drawn
    assert "sweep 'n': its manifest was lost: rebuilt _n.manifest.json" in done.stderr
