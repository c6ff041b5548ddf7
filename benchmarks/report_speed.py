"""How long `rdasim report` takes. Prints JSON lines, each figure beside its target.

    python benchmarks/report_speed.py                          # runs the sweeps and the exploration first
    python benchmarks/report_speed.py --results DIR            # reuses DIR/sweep (a policies sweep) and DIR/explore
    python benchmarks/report_speed.py --quick                  # a small noop sweep and exploration: seconds
    python benchmarks/report_speed.py --smoke                  # the same (tests/test_benchmarks.py runs it)

1. The 60-point policy sweep (examples/sweep_policies.toml: the issue's 54-point sweep with its spill points
   crossed over both seeds) reported whole, as a user runs it (`rdasim report DIR`, a fresh process, on
   every core): target at most 10 s on 2 cores. Before the report was parallel: 101 s at load 1.1 (85 s measured here).
2. The same with --x memory_policy --y tokens_per_second: only that figure.
3. An exploration's report (examples/explore_kv.toml, the README's --budget 6): target at most 10 s.

Each time is the median of ``--repeats`` runs, in a fresh process each; the load average before and after is
printed beside it (the machine may be shared: the lead re-measures on a quiet one).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TARGET_SECONDS = 10.0
# the shapes of the JSON lines (tests/test_benchmarks.py runs --smoke and checks them)
SMOKE_KEYS = (("benchmark", "what", "seconds", "all_runs", "figures", "report_line", "load_before", "load_after"),)


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _rdasim(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    got = subprocess.run([sys.executable, "-m", "cluster.cli", *args], capture_output=True, text=True, env=env,
                         cwd=ROOT)
    if check and got.returncode not in (0, 3):  # 3: a sweep with points that did not complete (the policy sweep)
        raise SystemExit(f"rdasim {' '.join(args)} exited {got.returncode}:\n{got.stderr}")
    return got


def _timed_report(results: Path, out: Path, repeats: int, *extra: str) -> dict:
    times, lines = [], []
    load = _load()
    for _ in range(repeats):
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        got = _rdasim("report", str(results), "--out", str(out), *extra)
        times.append(time.perf_counter() - start)
        lines = got.stderr.strip().splitlines()
    figures = len([p for p in got.stdout.split() if p.endswith(".png")])
    return {"seconds": round(statistics.median(times), 2), "all_runs": [round(t, 2) for t in times],
            "figures": figures, "report_line": lines[-1] if lines else "", "load_before": load,
            "load_after": _load(), "cpus": os.cpu_count()}


def _line(name: str, what: str, timing: dict, target: float | None = TARGET_SECONDS) -> None:
    row = {"benchmark": name, "what": what, **timing}
    if target is not None:
        row.update(target_seconds=target, meets_target=timing["seconds"] <= target)
    print(json.dumps(row), flush=True)


def full(results: Path | None, repeats: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="rdasim-report-bench-"))
    try:
        sweep = results / "sweep" if results else work / "sweep"
        explore = results / "explore" if results else work / "explore"
        if not (sweep / "_kv-policies.manifest.json").is_file():
            _rdasim("sweep", str(ROOT / "examples" / "sweep_policies.toml"), "--out", str(sweep), "--quiet")
        if not (explore / "_trials.manifest.json").is_file():
            _rdasim("explore", str(ROOT / "examples" / "explore_kv.toml"), "--out", str(explore), "--budget", "6",
                    "--in-process", "--quiet")
        _line("report_sweep", "rdasim report of the 60-point policy sweep (examples/sweep_policies.toml)",
              _timed_report(sweep, work / "figures", repeats))
        _line("report_sweep_asked", "the same with --x memory_policy --y tokens_per_second (one figure)",
              _timed_report(sweep, work / "asked", repeats, "--x", "memory_policy", "--y", "tokens_per_second"))
        _line("report_explore", "rdasim report of examples/explore_kv.toml at the README's --budget 6",
              _timed_report(explore, work / "explore-figures", repeats))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def quick() -> None:
    """A 12-point noop sweep and a 6-trial noop exploration, each reported once: the machinery, in seconds."""
    work = Path(tempfile.mkdtemp(prefix="rdasim-report-quick-"))
    try:
        spec = work / "s.toml"
        spec.write_text('[sweep]\nname = "q"\ncommand = "noop"\n[axes]\nnoop.value = [1.0, 2.0, 3.0]\n'
                        'noop.sleep = [0.0, 0.001]\nnoop.fail = [false, true]\n')
        _rdasim("sweep", str(spec), "--out", str(work / "sweep"), "--in-process", "--quiet")
        _line("report_sweep_quick", "rdasim report of a 12-point noop sweep", _timed_report(work / "sweep",
                                                                                           work / "f", 1), None)
        ex = work / "e.toml"
        ex.write_text('[base.noop]\nvalue = 0.5\n[explore]\ncommand = "noop"\nbudget = 6\noptimizer = "random"\n'
                      '[explore.space]\n"noop.value" = { type = "real", low = 0.0, high = 1.0 }\n'
                      '"noop.sleep" = { type = "real", low = 0.0, high = 0.05 }\n'
                      '[[explore.objectives]]\nmetric = "value"\n[[explore.objectives]]\nmetric = "slept"\n')
        _rdasim("explore", str(ex), "--out", str(work / "explore"), "--in-process", "--quiet")
        _line("report_explore_quick", "rdasim report of a 6-trial noop exploration",
              _timed_report(work / "explore", work / "g", 1), None)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small noop results, reported once (seconds)")
    parser.add_argument("--results", type=Path, help="reuse DIR/sweep and DIR/explore (made there if absent)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="as --quick: the machinery, once, in seconds")
    args = parser.parse_args()
    if args.quick or args.smoke:
        quick()
    else:
        full(args.results, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
