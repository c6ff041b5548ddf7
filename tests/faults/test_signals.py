"""SIGTERM (``kill``, ``ray job stop``, a scheduler's time limit) ends a sweep with exit 143 and one line, on Ray
as in-process, the manifest's run marked interrupted; a rerun finishes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.faults.conftest import ROOT
from tests.faults.sweeps import noop_spec


def _sweep_until_started(spec, out, *extra) -> subprocess.Popen:
    """A sweep in a child process, returned once its run is recorded (its manifest written)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    child = subprocess.Popen([sys.executable, "-m", "cluster.cli", "sweep", str(spec), "--out", str(out), "--quiet",
                              *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    manifest = out / "_n.manifest.json"
    deadline = time.monotonic() + 60
    while not manifest.is_file():
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()
        time.sleep(0.1)
    time.sleep(1.0)  # points running
    return child


@pytest.mark.parametrize("backend", [[], ["--in-process"]], ids=["ray", "in-process"])
def test_sigterm_exits_143_with_one_line_and_the_run_marked_interrupted(tmp_path, backend):
    spec = noop_spec(tmp_path, values=range(1, 41), extra="[base.noop]\nsleep = 0.3\n")
    out = tmp_path / "out"
    child = _sweep_until_started(spec, out, *backend)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 143, err[-3000:]
    assert err.strip().splitlines() == ["terminated (signal 15)"], err[-3000:]
    run = json.loads((out / "_n.manifest.json").read_text())["runs"][-1]
    assert run["state"] == "interrupted" and run["ended"]
