"""Output paths: checked before any work, results printed if they still cannot be written, modes as the umask says."""

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cluster.cli import main
from tests.paths import EXAMPLES, ROOT, TEST_DATA

CSV = str(TEST_DATA / "minimalloc" / "G.1048576.csv")


def _bad_paths(tmp_path: Path) -> dict[str, str]:
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory")
    return {"a file": str(a_file), "under a file": str(a_file / "sub"), "unwritable": "/proc/rdasim-out"}


# every command that writes, with the work it would do (each takes seconds to minutes if it ran)
COMMANDS = {
    "noc": lambda out: ["noc", "--out", out],  # the reference curve: a minute
    "run": lambda out: ["run", str(EXAMPLES / "kv_decode.toml"), "--out", out],
    "run --trace": lambda out: ["run", str(EXAMPLES / "kv_decode.toml"), "--trace", f"{out}/trace.json"],
    "map": lambda out: ["map", "--preset", "gpt3-1t-sn30", "--out", out],
    "sweep": lambda out: ["sweep", str(EXAMPLES / "sweep_noc.toml"), "--in-process", "--out", out],
    "report": lambda out: ["report", str(ROOT / "tests"), "--out", out],
    "alloc plan": lambda out: ["alloc", "plan", CSV, "--method", "exact", "--out", f"{out}/offsets.csv"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_output_path_is_refused_in_one_line_before_any_work(tmp_path, capsys, command):
    for why, path in _bad_paths(tmp_path).items():
        start = time.perf_counter()
        code = main(COMMANDS[command](path))
        err = capsys.readouterr().err.strip()
        assert code == 2, (why, err)
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert path in err and ("is a file" in err or "cannot write" in err), (why, err)
        assert time.perf_counter() - start < 5, f"{command} ({why}) ran before checking its output"


def test_a_file_path_that_is_a_directory_is_refused(tmp_path, capsys):
    assert main(["alloc", "plan", CSV, "--method", "greedy", "--out", str(tmp_path)]) == 2
    assert "is a directory, expected a file name" in capsys.readouterr().err


def _blocked(out: Path, name: str) -> Path:
    """An output directory where table ``name``'s directory is taken by a file: the check passes, the write fails."""
    out.mkdir(parents=True)
    (out / name).write_text("not a directory")
    return out


def test_a_noc_result_that_cannot_be_written_is_printed_as_json(tmp_path, capsys):
    out = _blocked(tmp_path / "out", "noc_summary")
    code = main(["noc", "--k", "4", "--rate", "0.1", "--set", "noc.warmup_cycles=200",
                 "--set", "noc.measure_cycles=300", "--out", str(out), "--quiet"])
    got = capsys.readouterr()
    assert code == 1
    row = json.loads(got.out.strip().splitlines()[-1])
    assert row["rate"] == 0.1 and row["avg_latency"] > 0 and len(row["result_hash"]) == 32
    (line,) = got.err.strip().splitlines()
    assert "noc_summary" in line and "printed above as JSON" in line


def test_a_run_result_that_cannot_be_written_is_printed_as_json(tmp_path, capsys):
    out = _blocked(tmp_path / "out", "run_summary")
    code = main(["run", str(EXAMPLES / "race.toml"), "--out", str(out), "--quiet"])
    got = capsys.readouterr()
    assert code == 1
    summary = json.loads(got.out.strip().splitlines()[-1])
    assert summary["workload"] == "race" and summary["status"] == "completed"
    assert "run_summary" in got.err and "printed above as JSON" in got.err


def test_a_map_result_that_cannot_be_written_is_printed_as_json(tmp_path, capsys):
    out = _blocked(tmp_path / "out", "map_plan")
    assert main(["map", "--preset", "gpt3-1t-sn30", "--out", str(out), "--quiet"]) == 1
    got = capsys.readouterr()
    assert json.loads(got.out.strip().splitlines()[-1])["status"] == "optimal"


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*") if p.is_file()}


def test_files_get_the_mode_the_umask_allows(tmp_path):
    """Parquet, run.json, traces, CSV, PNG and sweep files: 0644 under umask 022, 0640 under 027."""
    script = f"""
import os, sys
os.umask(int(sys.argv[1], 8))
from cluster.cli import main
from tests.paths import ROOT, EXAMPLES
out = sys.argv[2]
codes = [
    main(["run", "{EXAMPLES / 'race.toml'}", "--out", out + "/run", "--trace", out + "/trace.json", "--quiet"]),
    main(["alloc", "plan", "{CSV}", "--method", "greedy", "--out", out + "/offsets.csv", "--quiet"]),
    main(["report", out + "/run", "--out", out + "/figures", "--quiet"]),
]
sys.exit(max(codes))
"""
    for mask, want in (("022", 0o644), ("027", 0o640)):
        out = tmp_path / mask
        proc = subprocess.run([sys.executable, "-c", script, mask, str(out)], capture_output=True, text=True,
                              cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        modes = _modes(out)
        kinds = {Path(name).suffix for name in modes}
        assert {".parquet", ".json", ".csv", ".png"} <= kinds
        assert all(m == want for m in modes.values()), {n: oct(m) for n, m in modes.items() if m != want}


def test_sweep_files_get_the_mode_the_umask_allows(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\nname = "s"\ncommand = "noop"\n[axes]\nnoop.value = [1, 2]\n')
    script = "import os, sys; os.umask(0o022); from cluster.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", script, "sweep", str(spec), "--in-process", "--out",
                           str(tmp_path / "out"), "--quiet"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    modes = _modes(tmp_path / "out")
    assert len(modes) >= 3 and set(modes.values()) == {0o644}, modes
    assert pq.read_table(next((tmp_path / "out").rglob("*.parquet"))).num_rows == 1
    assert os.access(tmp_path / "out", os.R_OK)
