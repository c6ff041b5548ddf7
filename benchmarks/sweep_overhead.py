"""Sweeps at scale and their overhead. Prints JSON lines, each target beside its figure.

    python benchmarks/sweep_overhead.py                    # 10^5 noop points on an embedded Ray, then NoC points
    python benchmarks/sweep_overhead.py --points 20000     # fewer points (still measured, never extrapolated)
    python benchmarks/sweep_overhead.py --quick            # seconds: 300 points in-process, no Ray, no NoC
    python benchmarks/sweep_overhead.py --smoke            # 20 points in-process, then 2 NoC points on Ray once

1. ``sweep_scale``: a sweep of ``--points`` trivial points (command ``noop``: no work, so what is
   measured is the sweep itself) on an embedded local Ray, end to end: from the spec's plan to
   the last point's file, points per second (target >= 200 on 2 cores); the driver's peak
   memory (its resident set, the Ray processes not counted; target <= 1 GiB); the files and
   bytes of the result table and the largest point-file footer among a sample (target <= 2 KB,
   whatever the number of points); the time to read the whole table with pyarrow (rdasim's
   read_dataset and a plain pyarrow.dataset) and with DuckDB (a full scan into Arrow), before
   and after ``rdasim sweep compact`` (target after: <= 5 s); the compaction's own time; and a
   rerun, which must compute nothing. Every reader must see every point exactly once.
2. ``sweep_overhead_vs_loop`` (not in --quick): the same small NoC points run in a plain Python
   loop and as a sweep with one point in flight, alternated so machine noise hits both; the
   per-point overhead (sweep - loop), measured on the points run, as a share of a 2 s point
   (target < 5 %); "machinery" is the sweep's wall time minus the time inside the points' jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

NOC_BASE = {"noc": {"k": 4, "rate": 0.2, "warmup_cycles": 200, "measure_cycles": 500}}
GIB = 1 << 30


def _plan(name: str, command: str, base: dict, axes: dict, compact: str = "never"):
    from cluster.sweep.plan import plan_from_spec
    from cluster.sweep.spec import parse_spec

    spec, issues = parse_spec({"sweep": {"name": name, "command": command, "compact": compact}, "base": base,
                               "axes": axes}, Path("."))
    return plan_from_spec(spec, issues)


def _peak_rss() -> int:
    """This process's peak resident set so far, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _median_seconds(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def _files(table_dir: Path) -> list[Path]:
    from cluster.sweep.layout import dataset_files

    return dataset_files(table_dir)


def _footers(files: list[Path], sample: int = 200) -> int:
    """The largest Parquet footer (thrift FileMetaData, key-value metadata included) among ``sample`` files."""
    import pyarrow.parquet as pq

    step = max(len(files) // sample, 1)
    return max(pq.read_metadata(f).serialized_size for f in files[::step])


READERS = {  # each reads the whole table into Arrow: its rows and distinct points are checked
    "pyarrow_read_dataset": "from cluster.sweep.dataset import read_dataset\n"
                            "read = lambda: read_dataset(SWEEP)",
    "pyarrow_dataset": "import pyarrow.dataset as ds\n"
                       "read = lambda: ds.dataset(f'{SWEEP}/{TABLE}', format='parquet').to_table()",
    "duckdb": "import duckdb\n"
              "sql = f\"SELECT * FROM read_parquet('{SWEEP}/{TABLE}/**/*.{TABLE}.parquet', hive_partitioning = false, "
              "union_by_name = true)\"\n"
              "def read():\n"
              "    rel = duckdb.sql(sql)\n"
              "    return (rel.to_arrow_table if hasattr(rel, 'to_arrow_table') else rel.fetch_arrow_table)()",
}
TIMED = """
import json, statistics, sys, time
SWEEP, TABLE, REPEATS = sys.argv[1], sys.argv[2], int(sys.argv[3])
{setup}
times = []
for _ in range(REPEATS):
    start = time.perf_counter()
    t = read()
    times.append(time.perf_counter() - start)
print(json.dumps([statistics.median(times), t.num_rows, len(set(t.column("point_id").to_pylist()))]))
"""


def _reads(sweep_dir: Path, table: str, repeats: int, isolated: bool = True) -> dict:
    """Seconds to read the whole table with each reader (median of ``repeats``), and the rows and distinct
    points it saw. ``isolated``: each reader in a process of its own (a cold start, and its memory, DuckDB's
    included, not the driver's); else here (--quick: no interpreter start per reader)."""
    import contextlib
    import importlib.util
    import io
    import subprocess

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    out = {}
    for name, setup in READERS.items():
        if name == "duckdb" and importlib.util.find_spec("duckdb") is None:
            continue
        code, argv = TIMED.format(setup=setup), [str(sweep_dir), table, str(repeats)]
        if isolated:
            printed = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True,
                                     cwd=root, env={**os.environ, "PYTHONPATH": root}).stdout
        else:
            buffer, saved = io.StringIO(), sys.argv
            sys.argv = ["-c", *argv]
            try:
                with contextlib.redirect_stdout(buffer):
                    exec(code, {})  # noqa: S102 - the same snippet a child process runs
            finally:
                sys.argv = saved
            printed = buffer.getvalue()
        out[name] = tuple(json.loads(printed.strip().splitlines()[-1]))
    return out


def _bytes(files: list[Path]) -> int:
    return sum(f.stat().st_size for f in files)


# the shapes of the JSON lines (tests/test_benchmarks.py runs --smoke and checks them)
SMOKE_KEYS = (("benchmark", "points", "executor", "points_per_second", "driver_peak_gib", "largest_point_footer_bytes",
               "read_seconds_after_compaction", "rerun_computed"),
              ("benchmark", "points", "repeats", "loop_seconds", "sweep_seconds", "overhead_seconds_per_point",
               "machinery_seconds_per_point", "two_in_flight_seconds"))


def scale(points: int, out: Path, in_process: bool, read_repeats: int) -> dict:
    """One sweep of ``points`` noop points, end to end, then its reads before and after compaction."""
    from cluster.sweep.compact import compact
    from cluster.sweep.runner import run_sweep

    start = time.perf_counter()
    plan = _plan("scale", "noop", {}, {"noop.value": [float(i) for i in range(points)]})
    plan_seconds = time.perf_counter() - start
    summary = run_sweep(plan, out, quiet=True, in_process=in_process)
    seconds = time.perf_counter() - start
    assert summary.computed == points and summary.failed == 0, summary
    peak_sweep = _peak_rss()
    sweep_dir, table = out / "scale", plan.command.result
    files = _files(sweep_dir / table)
    before = {"files": len(files), "bytes": _bytes(files), "largest_footer_bytes": _footers(files),
              "reads": _reads(sweep_dir, table, 1, not in_process)}
    (done,) = compact(out)
    after_files = _files(sweep_dir / table)
    after = {"files": len(after_files), "bytes": _bytes(after_files), "largest_footer_bytes": _footers(after_files),
             "reads": _reads(sweep_dir, table, read_repeats, not in_process)}
    peak = _peak_rss()
    rerun = run_sweep(plan, out, quiet=True, in_process=in_process)
    for state in (before, after):  # every reader saw every point once
        assert all(rows == seen == points for _, rows, seen in state["reads"].values()), state["reads"]
    rate = points / seconds
    read_after = max(s for s, _, _ in after["reads"].values())
    return {
        "benchmark": "sweep_scale", "points": points, "executor": "in-process" if in_process else "embedded ray",
        "cpus": os.cpu_count(), "load_average": os.getloadavg(),
        "seconds": round(seconds, 1), "plan_seconds": round(plan_seconds, 1),
        "points_per_second": round(rate, 1),
        **({"target": "none in-process (the target is for an embedded Ray)"} if in_process else
           {"target_points_per_second": 200, "meets_target": rate >= 200}),
        "driver_peak_bytes": peak_sweep, "driver_peak_gib": round(peak_sweep / GIB, 3), "target_driver_peak_gib": 1.0,
        "driver_peak_meets_target": peak_sweep <= GIB,
        "driver_peak_with_compaction_gib": round(peak / GIB, 3),
        "before": _round(before), "compaction_seconds": round(done.seconds, 1), "after": _round(after),
        "points_per_second_with_compaction": round(points / (seconds + done.seconds), 1),
        "largest_point_footer_bytes": before["largest_footer_bytes"], "target_footer_bytes": 2048,
        "footer_meets_target": before["largest_footer_bytes"] <= 2048,
        "read_seconds_after_compaction": round(read_after, 2), "target_read_seconds": 5.0,
        "read_meets_target": read_after <= 5.0,
        "rerun_computed": rerun.computed, "rerun_seconds": round(rerun.seconds, 1),
        "definitions": "seconds: plan + run to the last point's file; reads: the whole table into Arrow "
                       "(median of repeats after compaction, one run before); footer: Parquet FileMetaData bytes",
    }


def _round(state: dict) -> dict:
    return {**state, "reads": {k: {"seconds": round(s, 2), "rows": rows, "points": seen}
                               for k, (s, rows, seen) in state["reads"].items()}}


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


def overhead(points: int, repeats: int) -> dict:
    from cluster.config import load
    from cluster.config.noc import NOC_SCHEMA
    from cluster.jobs.noc import run_noc

    seeds = list(range(1, points + 1))
    plan = _plan("noc", "noc", NOC_BASE, {"run.seed": seeds})
    configs = [load(NOC_SCHEMA, raw={**NOC_BASE, "run": {"seed": s}}) for s in seeds]
    assert [p.config for p in plan.points] == configs  # the very same points
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
        "load_average": os.getloadavg(),
        "point": "noc 4x4 mesh, rate 0.2, warm-up 200 + measure 500 cycles",
        "loop_seconds": round(loop, 3), "sweep_seconds": round(sweep, 3),
        "seconds_per_point": round(loop / points, 4),
        "overhead_seconds_per_point": round(per_point, 4),
        "overhead_percent_for_2s_points": round(100 * per_point / 2.0, 3),
        "target_percent_for_2s_points": 5.0, "meets_target": 100 * per_point / 2.0 < 5.0,
        "machinery_seconds_per_point": round(machinery, 4),
        "machinery_percent_for_2s_points": round(100 * machinery / 2.0, 3),
        "driver_cpu_seconds_per_point": round(statistics.median(cpus) / points, 4),
        "definitions": "overhead: sweep wall - loop wall, one point in flight; machinery: sweep wall - time "
                       "inside the points' jobs (dispatch, transfer, files, manifest)",
        "two_in_flight_seconds": round(two, 3), "two_in_flight_vs_ideal_half_loop": round(two / (loop / 2), 3),
        "all_loop_seconds": [round(x, 3) for x in loops], "all_sweep_seconds": [round(x, 3) for x in sweeps],
    }


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="seconds: 300 points in-process (no Ray), no NoC part")
    parser.add_argument("--points", type=int, default=None, help="noop points of the scale run (default 100000)")
    parser.add_argument("--noc-points", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3, help="NoC pairs, and reads after compaction")
    parser.add_argument("--out", type=Path, help="keep the sweep here (default: a temporary directory)")
    parser.add_argument("--smoke", action="store_true", help="20 points in-process, then 2 NoC points on Ray, once "
                        "(joining $RAY_ADDRESS if set)")
    args = parser.parse_args()
    if args.smoke:
        args.points, args.noc_points, args.repeats = args.points or 20, 2, 1
    points = args.points or (300 if args.quick else 100_000)
    with tempfile.TemporaryDirectory(prefix="rdasim-scale-") as tmp:
        out = args.out or Path(tmp)
        if not (args.quick or args.smoke):
            from cluster.parallel.ray_env import init_ray

            start = time.perf_counter()
            init_ray(None)
            print(json.dumps({"benchmark": "ray_start", "seconds": round(time.perf_counter() - start, 2),
                              "note": "one-off: starting the embedded local Ray"}), flush=True)
            _sweep(_plan("warm", "noop", {}, {"noop.value": [0.0, 1.0, 2.0, 3.0]}))  # start the workers
        in_process = args.quick or args.smoke
        print(json.dumps(scale(points, out, in_process, 1 if in_process else args.repeats)), flush=True)
    if not args.quick:
        print(json.dumps(overhead(args.noc_points, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
