"""Overhead of `rdasim sweep` on a local Ray (issue: sweeps). Prints JSON lines.

    python benchmarks/sweep_overhead.py            # default sizes
    python benchmarks/sweep_overhead.py --quick    # fewer points and repeats
    python benchmarks/sweep_overhead.py --smoke    # a handful of points once, joining $RAY_ADDRESS if set

1. Throughput of trivial points: a sweep of `noop` points (no work) on an embedded
   local Ray, from plan to the last file written; points per second, median of repeats.
   Target: at least 20 points/s on two cores.
2. Overhead against a loop: the same small NoC points (4x4 mesh, short windows) run
   (a) in a plain Python loop calling run_noc, and (b) as a sweep with one point in
   flight at a time (so both use one core for the simulation), alternating the two so
   machine noise hits both; median of the paired differences. The per-point overhead
   (sweep - loop) / points is then expressed against a 2 s point, and the cost of
   1,000 points is extrapolated from it (measured on fewer points, as stated in the
   JSON). "machinery" is the sweep's wall time minus the time spent inside the jobs:
   what the sweep itself costs, free of the noise in the jobs' own run time. Ray's
   start-up and the first start of its worker processes are one-off costs and reported
   apart. A sweep with two points in flight is also timed against half
   the loop (the ideal on two cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

NOC_BASE = {"noc": {"k": 4, "rate": 0.2, "warmup_cycles": 200, "measure_cycles": 500}}


def _plan(name: str, command: str, base: dict, axes: dict):
    from cluster.sweep.plan import plan_from_spec
    from cluster.sweep.spec import parse_spec

    spec, issues = parse_spec({"sweep": {"name": name, "command": command}, "base": base, "axes": axes}, Path("."))
    return plan_from_spec(spec, issues)


def _sweep(plan, max_concurrency=None) -> tuple[float, float, float]:
    """(wall seconds, seconds spent in the points' jobs, CPU seconds of this driver process)."""
    from cluster.sweep.dataset import read_dataset
    from cluster.sweep.runner import run_sweep

    with tempfile.TemporaryDirectory(prefix="rdasim-bench-") as out:
        cpu, start = time.process_time(), time.perf_counter()
        summary = run_sweep(plan, out, max_concurrency=max_concurrency, quiet=True)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        assert summary.computed == len(plan.points) and summary.failed == 0
        job = sum(read_dataset(Path(out) / plan.spec.name, columns=["point_seconds"]).column(0).to_pylist())
    return seconds, job, cpu


# the shapes of the JSON lines (tests/test_benchmarks.py runs --smoke and checks them)
SMOKE_KEYS = (("benchmark", "seconds", "note"),
              ("benchmark", "points", "repeats", "points_per_second", "target_points_per_second", "meets_target"),
              ("benchmark", "points", "repeats", "loop_seconds", "sweep_seconds", "overhead_seconds_per_point",
               "machinery_seconds_per_point", "two_in_flight_seconds"))


def trivial(points: int, repeats: int) -> dict:
    plan = _plan("trivial", "noop", {}, {"noop.value": [float(i) for i in range(points)]})
    _sweep(_plan("warm", "noop", {}, {"noop.value": [0.0, 1.0, 2.0, 3.0]}))  # start the workers
    rates = [points / _sweep(plan)[0] for _ in range(repeats)]
    rate = statistics.median(rates)
    return {"benchmark": "sweep_trivial_points", "points": points, "repeats": repeats,
            "points_per_second": round(rate, 1), "all_runs": [round(r, 1) for r in rates],
            "target_points_per_second": 20, "meets_target": rate >= 20, "cpus": os.cpu_count()}


def overhead(points: int, repeats: int) -> dict:
    from cluster.config import config_hash, load
    from cluster.config.noc import NOC_SCHEMA
    from cluster.jobs.noc import run_noc

    seeds = list(range(1, points + 1))
    plan = _plan("noc", "noc", NOC_BASE, {"run.seed": seeds})
    configs = [load(NOC_SCHEMA, raw={**NOC_BASE, "run": {"seed": s}}) for s in seeds]
    assert [p.id for p in plan.points] == [config_hash(c) for c in configs]  # the very same points
    _sweep(_plan("warm", "noc", NOC_BASE, {"run.seed": [101, 102]}), max_concurrency=1)  # warm the workers
    loops, sweeps, jobs, cpus, pairs = [], [], [], [], []
    for _ in range(repeats):  # alternate, so machine noise hits both
        start = time.perf_counter()
        for cfg in configs:
            run_noc(cfg, quiet=True)
        loops.append(time.perf_counter() - start)
        seconds, job, cpu = _sweep(plan, max_concurrency=1)
        sweeps.append(seconds)
        jobs.append(job)
        cpus.append(cpu)
        pairs.append(_sweep(plan, max_concurrency=2)[0])
    loop, sweep, two = (statistics.median(x) for x in (loops, sweeps, pairs))
    per_point = statistics.median(s - lp for s, lp in zip(sweeps, loops)) / points
    machinery = statistics.median(s - j for s, j in zip(sweeps, jobs)) / points
    return {
        "benchmark": "sweep_overhead_vs_loop", "points": points, "repeats": repeats,
        "point": "noc 4x4 mesh, rate 0.2, warm-up 200 + measure 500 cycles",
        "loop_seconds": round(loop, 3), "sweep_seconds": round(sweep, 3),
        "seconds_per_point": round(loop / points, 4),
        "overhead_seconds_per_point": round(per_point, 4),
        "overhead_percent_for_2s_points": round(100 * per_point / 2.0, 3),
        "target_percent_for_2s_points": 5.0, "meets_target": 100 * per_point / 2.0 < 5.0,
        "machinery_seconds_per_point": round(machinery, 4),
        "machinery_percent_for_2s_points": round(100 * machinery / 2.0, 3),
        "driver_cpu_seconds_per_point": round(statistics.median(cpus) / points, 4),
        "extrapolated_overhead_seconds_for_1000_points": round(1000 * per_point, 1),
        "extrapolated": f"measured on {points} points (median of {repeats} paired runs), scaled to 1,000 points",
        "definitions": "overhead: sweep wall - loop wall, one point in flight; machinery: sweep wall - time "
                       "inside the points' jobs (dispatch, transfer, files, manifest)",
        "two_in_flight_seconds": round(two, 3), "two_in_flight_vs_ideal_half_loop": round(two / (loop / 2), 3),
        "all_loop_seconds": [round(x, 3) for x in loops], "all_sweep_seconds": [round(x, 3) for x in sweeps],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer points and repeats")
    parser.add_argument("--trivial-points", type=int, default=None)
    parser.add_argument("--noc-points", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--smoke", action="store_true", help="8 trivial and 2 NoC points, once")
    args = parser.parse_args()
    if args.smoke:
        args.trivial_points, args.noc_points, args.repeats = args.trivial_points or 8, args.noc_points or 2, 1
    repeats = args.repeats or (2 if args.quick else 5)
    from cluster.parallel.ray_env import init_ray

    start = time.perf_counter()
    init_ray(None)
    print(json.dumps({"benchmark": "ray_start", "seconds": round(time.perf_counter() - start, 2),
                      "note": "one-off: starting the embedded local Ray"}), flush=True)
    print(json.dumps(trivial(args.trivial_points or (100 if args.quick else 300), repeats)), flush=True)
    print(json.dumps(overhead(args.noc_points or (10 if args.quick else 30), repeats)), flush=True)


if __name__ == "__main__":
    main()
