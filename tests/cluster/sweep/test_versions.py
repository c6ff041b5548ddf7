"""A sweep never mixes results silently: spec versions, code versions, the manifest's name, --dry-run."""

import json
import re
import subprocess
from pathlib import Path

import pyarrow as pa

from cluster.cli import main
from cluster.results.reading import read_table
from cluster.sweep.dataset import read_dataset
from tests.paths import ROOT

SPEC = """
[sweep]
name = "s"
command = "noop"
[base]
{base}
[axes]
noop.value = [1.0, 2.0]
"""


def _spec(path: Path, base: str = "") -> Path:
    path.write_text(SPEC.format(base=base))
    return path


def _sweep(spec: Path, out: Path, *extra: str) -> int:
    return main(["sweep", str(spec), "--out", str(out), "--in-process", "--quiet", *extra])


def _status(out: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["sweep", "status", str(out), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _rerun_changed(tmp_path: Path, *flags: str, expect: int = 0) -> Path:
    """Run the spec, then a version with a changed [base] (the issue's `noc.vcs = 2`) into the same --out."""
    out = tmp_path / "out"
    assert _sweep(_spec(tmp_path / "s.toml"), out) == 0
    assert _sweep(_spec(tmp_path / "s.toml", base="noop.sleep = 0.01"), out, *flags) == expect
    return out


def test_a_changed_spec_is_refused_instead_of_mixed_into_the_old_points(tmp_path, capsys):
    out = _rerun_changed(tmp_path, expect=2)
    err = capsys.readouterr().err
    assert "another spec version" in err and "--add" in err and "--replace" in err
    assert read_dataset(out / "s").num_rows == 2
    got = _status(out, capsys)
    assert (got["total"], got["done"], got["stray"]) == (2, 2, 0)


def test_add_keeps_both_versions_and_says_which_point_is_which(tmp_path, capsys):
    rows = read_dataset(_rerun_changed(tmp_path, "--add") / "s").to_pylist()
    assert len(rows) == 4
    by_spec = {}
    for r in rows:
        by_spec.setdefault(r["sweep_spec"], set()).add((r["noop_value"], r["slept"]))
    assert sorted(by_spec.values(), key=sorted) == [{(1.0, 0.0), (2.0, 0.0)}, {(1.0, 0.01), (2.0, 0.01)}]
    manifest = json.loads((tmp_path / "out" / "_s.manifest.json").read_text())
    assert {v["hash"] for v in manifest["specs"]} == set(by_spec)
    assert all("noop.value" in v["text"] for v in manifest["specs"])
    got = _status(tmp_path / "out", capsys)
    assert (got["total"], got["done"], got["specs"]) == (4, 4, 2)


def test_replace_starts_the_sweep_again(tmp_path, capsys):
    out = _rerun_changed(tmp_path, "--replace")
    assert sorted((r["noop_value"], r["slept"]) for r in read_dataset(out / "s").to_pylist()) == [(1.0, 0.01),
                                                                                               (2.0, 0.01)]
    assert len(json.loads((out / "_s.manifest.json").read_text())["specs"]) == 1


def test_retries_and_description_are_not_a_new_spec_version(tmp_path):
    out = tmp_path / "out"
    spec = _spec(tmp_path / "s.toml")
    assert _sweep(spec, out) == 0
    spec.write_text(spec.read_text().replace('command = "noop"', 'command = "noop"\nmax_retries = 1\n'
                                             'description = "again"'))
    assert _sweep(spec, out) == 0


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_every_row_and_the_manifest_record_the_code_that_ran(tmp_path):
    from cluster.version import code_version

    code_version.cache_clear()  # asked once per process: ask now, not when an earlier test did
    out = tmp_path / "out"
    assert _sweep(_spec(tmp_path / "s.toml"), out) == 0
    rows = read_dataset(out / "s").to_pylist()
    commit = _git("rev-parse", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=all", "--", "sim", "mapping", "allocators",
                      "cluster", "pyproject.toml"))
    assert {(r["rdasim_commit"], r["rdasim_dirty"]) for r in rows} == {(commit, dirty)}
    run = json.loads((out / "_s.manifest.json").read_text())["runs"][-1]
    assert run["code"]["commit"] == commit and run["code"]["dirty"] == dirty
    assert re.fullmatch(r"\d+\.\d+\.\d+\+g[0-9a-f]{12}(\.dirty\.[0-9a-f]{12})?", run["code_label"])


def test_resuming_on_other_code_is_refused_unless_told_to_mix(tmp_path, capsys):
    out = tmp_path / "out"
    spec = _spec(tmp_path / "s.toml")
    assert _sweep(spec, out) == 0
    path = out / "_s.manifest.json"
    manifest = json.loads(path.read_text())
    manifest["runs"][-1]["code_label"] = "0.1.0+g0123456789ab"  # as if an older checkout had computed them
    path.write_text(json.dumps(manifest))
    assert _sweep(spec, out, "--retry-failed") == 2
    err = capsys.readouterr().err
    assert "0.1.0+g0123456789ab" in err and "--mix-code" in err
    assert _sweep(spec, out, "--mix-code") == 0


def test_one_table_reads_across_an_out_directory_of_several_sweeps(tmp_path):
    out = tmp_path / "out"
    assert _sweep(_spec(tmp_path / "s.toml"), out) == 0
    other = tmp_path / "t.toml"
    other.write_text(SPEC.format(base="").replace('name = "s"', 'name = "t"'))
    assert _sweep(other, out) == 0
    assert main(["report", str(out), "--quiet"]) == 0  # figures land in the out directory too
    table = read_table(out, "sweep_noop")
    assert table.num_rows == 4 and sorted(set(table["sweep_id"].to_pylist())) == ["s", "t"]
    assert table.schema.field("noop_value").type == pa.float64()


RACE = """
[sweep]
name = "race"
command = "run"
[base]
workload.kind = "race"
[axes]
chip.rows = [2, 16]
"""


def test_dry_run_runs_the_cross_field_checks_the_run_would(tmp_path, capsys):
    spec = tmp_path / "race.toml"
    spec.write_text(RACE)
    assert main(["sweep", str(spec), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "1 of 2 points would fail" in err
    assert "workload.race.producer: tile [2, 4] is outside the 2x16 grid (point 0)" in err
    spec.write_text(RACE.replace("[2, 16]", "[8, 16]"))
    assert main(["sweep", str(spec), "--dry-run"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
