"""Every benchmark runs in the suite: each script in benchmarks/ has a quick mode
for it (``--smoke``: its smallest case, one repeat, in seconds; a benchmark's own ``--quick``, where
it has one, is a shorter measurement, not this) and declares ``SMOKE_KEYS``, the key sets of the
JSON lines it prints; a smoke test runs it and checks them, so a refactor cannot break a benchmark
unseen. A script added without them fails here.

The quick runs go two at a time (CI has 2 cores) in a module fixture; the benchmarks that use Ray
join one Ray started for them (``RAY_ADDRESS``), as a debugging session keeps one, instead of each
paying Ray's start. The figures of a quick run mean nothing: only that it runs and what it prints.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import ROOT

BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))
TIMEOUT = 240  # seconds a quick run may take on a busy 2-core machine (each takes a few when quiet)
CONCURRENT = 2

RAY_HOLDER = """
import sys
from cluster.parallel.ray_env import init_ray
ray = init_ray(num_cpus=2)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()  # until the tests close it
"""


def smoke_keys(path: Path) -> tuple[tuple[str, ...], ...] | None:
    """The script's ``SMOKE_KEYS`` (a literal at module level), None if it declares none."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SMOKE_KEYS" for t in node.targets):
            return tuple(tuple(k) for k in ast.literal_eval(node.value))
    return None


def test_every_benchmark_has_a_quick_mode_and_declares_its_keys():
    assert BENCHMARKS
    missing = [p.name for p in BENCHMARKS if '"--smoke"' not in p.read_text() or not smoke_keys(p)]
    assert not missing, f"benchmarks without --smoke and SMOKE_KEYS: {missing}"


@dataclass
class QuickRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory) -> dict[str, QuickRun]:
    """Every benchmark's quick run, two at a time, Ray ones joining one shared Ray."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    holder = subprocess.Popen([sys.executable, "-c", RAY_HOLDER], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        address = (holder.stdout.readline() if holder.stdout else "").strip()
        assert address, "could not start the shared Ray"
        env.update(RAY_ADDRESS=address, RAY_AUTH_MODE="token")  # Ray made the holder's token
        runs: dict[str, QuickRun] = {}
        waiting = list(BENCHMARKS)
        active: dict[str, tuple[subprocess.Popen, float, Path, Path]] = {}
        while waiting or active:
            while waiting and len(active) < CONCURRENT:
                path = waiting.pop(0)
                cwd = tmp_path_factory.mktemp(path.stem)
                out, err = cwd / "stdout", cwd / "stderr"
                with out.open("w") as o, err.open("w") as e:
                    proc = subprocess.Popen([sys.executable, str(path), "--smoke"], cwd=cwd, env=env, stdout=o,
                                            stderr=e, text=True)
                active[path.name] = (proc, time.perf_counter(), out, err)
            time.sleep(0.05)
            for name, (proc, start, out, err) in list(active.items()):
                if proc.poll() is None and time.perf_counter() - start < TIMEOUT:
                    continue
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                runs[name] = QuickRun(proc.returncode, out.read_text(), err.read_text(), time.perf_counter() - start)
                del active[name]
        return runs
    finally:
        if holder.stdin:
            holder.stdin.close()
        holder.wait(timeout=60)


@pytest.mark.parametrize("path", BENCHMARKS, ids=[p.name for p in BENCHMARKS])
def test_the_quick_run_prints_its_keys(path: Path, quick_runs):
    run = quick_runs[path.name]
    assert run.returncode == 0, f"{path.name} --smoke exit {run.returncode} after {run.seconds:.0f} s:\n" \
                                f"{run.stderr[-3000:]}"
    lines = [x for x in run.stdout.splitlines() if x.strip()]
    assert lines, f"{path.name} --smoke printed nothing"
    rows = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"{path.name} --smoke printed a line that is not JSON: {line[:200]}")
    want = smoke_keys(path) or ()
    for keys in want:
        assert any(set(keys) <= set(r) for r in rows), f"{path.name}: no line has {keys}"
    for r in rows:
        assert any(set(keys) <= set(r) for keys in want), f"{path.name}: a line of none of its shapes: {sorted(r)}"
