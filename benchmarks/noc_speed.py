"""Speed and memory of the cycle-level NoC (issue: foundation). Prints JSON lines.

    python benchmarks/noc_speed.py            # every case
    python benchmarks/noc_speed.py --quick    # fewer cycles and repeats
    python benchmarks/noc_speed.py --smoke    # 8x8, a few hundred cycles, 1 and 2 shards: what the test suite runs

Cases (config B, uniform traffic, load scaled with 1/k so each runs below saturation):
one shard in-process at 8x8 @ 0.30, 16x16 @ 0.15, 32x32 @ 0.075 and 64x64 @ 0.0375
(simulated cycles/s and router-cycles/s, median of 5 runs, steady state after a
warm-up, the compiled kernels loaded from their cache before timing; peak memory of the
process; each rate per second of wall time and per second of the process's CPU time, both
beside the target: on a shared machine the wall figure measures the other work), then 2
Ray shards against 1 in-process shard on 32x32 and 64x64, measured in one invocation
(speed-up, where the time goes per epoch, peak memory per actor). Each case runs in a
fresh process so peak memory is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

TARGETS = {8: 30_000, 32: 5_000}  # simulated cycles/s on one core
# BookSim2 (C++, -O3) on this 2-core machine, same config B and loads:
# for scale only, not measured in this run
BOOKSIM2 = {8: "2,568 - 3,387", 16: "551", 32: "100"}
LOADS = {8: 0.30, 16: 0.15, 32: 0.075, 64: 0.0375}
# the shapes of the JSON lines (tests/test_benchmarks.py runs --smoke and checks them)
SMOKE_KEYS = (("bench", "case", "shards", "cycles_per_s", "cycles_per_cpu_s", "router_cycles_per_s", "peak_rss_mb"),
              ("bench", "case", "shards", "chaining", "speedup", "epochs", "sync_fraction", "same_result_hash"))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_shard(k: int, cycles: int, repeats: int) -> dict:
    from sim.noc.params import NocParams
    from sim.noc.shard import NocShard
    from sim.noc.topology import Region

    p = NocParams(rows=k, cols=k, rate=LOADS[k], warmup_cycles=10**6, measure_cycles=1)
    rates, cpu_rates, build = [], [], []
    for _ in range(repeats):
        t = time.perf_counter()
        shard = NocShard(p, Region(0, k, 0, k))
        build.append(time.perf_counter() - t)
        shard.advance(0, 500)  # warm up: fill the network to its steady state
        t, c = time.perf_counter(), time.process_time()
        shard.advance(500, 500 + cycles)
        rates.append(cycles / (time.perf_counter() - t))
        cpu_rates.append(cycles / (time.process_time() - c))
    med, cpu = statistics.median(rates), statistics.median(cpu_rates)
    out = {"bench": "noc_speed", "case": f"{k}x{k}@{LOADS[k]}", "shards": 1, "backend": "local",
           "cycles_per_s": round(med, 1),
           # per second of this process's CPU time: what the rate is when the cores are not shared
           "cycles_per_cpu_s": round(cpu, 1)}
    if k in TARGETS:
        out["target_cycles_per_s"] = TARGETS[k]
        out["meets_target"] = med >= TARGETS[k]
        out["meets_target_per_cpu_s"] = cpu >= TARGETS[k]
    out.update({"router_cycles_per_s": round(med * k * k), "runs_cycles_per_s": [round(r, 1) for r in rates],
                "runs_cycles_per_cpu_s": [round(r, 1) for r in cpu_rates], "cycles_per_run": cycles,
                "load_average": round(os.getloadavg()[0], 2),
                "build_seconds": round(statistics.median(build), 3), "peak_rss_mb": round(_rss_mb(), 1)})
    if k in BOOKSIM2:
        out["booksim2_cycles_per_s_issue15"] = BOOKSIM2[k]
    if k == 64:
        out["memory_target_mb"] = 1024
        out["meets_memory_target"] = out["peak_rss_mb"] < 1024
    return out


def ray_two_shards(k: int, measure: int) -> dict:
    from cluster.jobs.noc import NocGrid
    from cluster.parallel.local import run_local
    from cluster.parallel.ray_actors import run_ray
    from cluster.parallel.ray_env import init_ray
    from sim.noc.params import NocParams
    from sim.noc.summary import summarize_noc

    init_ray(num_cpus=2)
    p = NocParams(rows=k, cols=k, rate=LOADS[k], warmup_cycles=300, measure_cycles=measure, drain_cycles=4000)
    grid = NocGrid(p)
    one = grid.regions(1, "rows")
    two = grid.regions(2, "rows")
    e1, _ = grid.epoch(one, None)
    e2, la = grid.epoch(two, None)
    local = run_local(grid.model(one), one, e1)
    graph = run_ray(grid.model(two), two, e2, chaining="compiled-graph")  # the alternative, measured in the same run
    ray2 = run_ray(grid.model(two), two, e2)
    s1 = summarize_noc(p, local.reports, local.saturated, local.in_transit_flits)
    s2 = summarize_noc(p, ray2.reports, ray2.saturated, ray2.in_transit_flits)
    sg = summarize_noc(p, graph.reports, graph.saturated, graph.in_transit_flits)
    busy = ray2.figures.busy_seconds
    gbusy = graph.figures.busy_seconds
    return {
        "bench": "noc_speed", "case": f"{k}x{k}@{LOADS[k]}", "shards": 2, "backend": "ray",
        "chaining": ray2.figures.chaining, "sim_cycles": s2["sim_cycles"],
        "one_shard_local_seconds": round(local.wall_seconds, 2),
        "two_shard_ray_seconds": round(ray2.wall_seconds, 2),
        "speedup": round(local.wall_seconds / ray2.wall_seconds, 3),
        "epochs": ray2.epochs, "epoch_cycles": e2, "lookahead": la,
        "ms_per_epoch": round(1e3 * ray2.wall_seconds / ray2.epochs, 3),
        "advance_ms_per_epoch_per_shard": [round(1e3 * b / ray2.epochs, 3) for b in busy],
        "sync_ms_per_epoch": round(1e3 * ray2.sync_seconds / ray2.epochs, 3),
        "sync_fraction": round(ray2.sync_seconds / ray2.wall_seconds, 3),
        "peak_rss_mb_per_actor": round(max(ray2.figures.peak_rss_bytes) / 2**20, 1),
        "same_result_hash": s1["result_hash"] == s2["result_hash"] == sg["result_hash"],
        "compiled_graph": {"seconds": round(graph.wall_seconds, 2),
                           "speedup": round(local.wall_seconds / graph.wall_seconds, 3),
                           "advance_ms_per_epoch_per_shard": [round(1e3 * b / graph.epochs, 3) for b in gbusy],
                           "sync_ms_per_epoch": round(1e3 * graph.sync_seconds / graph.epochs, 3),
                           "peak_rss_mb_per_actor": round(max(graph.figures.peak_rss_bytes) / 2**20, 1)},
    }


def _child(case: str, quick: bool, smoke: bool = False) -> None:
    kind, k = case.split(":")
    k = int(k)
    if kind == "one":
        cycles = 200 if smoke else {8: 3000, 16: 2000, 32: 1000, 64: 400}[k] // (2 if quick else 1)
        print(json.dumps(one_shard(k, cycles, 1 if smoke else 2 if quick else 5)))
    else:
        print(json.dumps(ray_two_shards(k, 100 if smoke else 300 if quick else 1000)))


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="8x8 only, a few hundred cycles, once")
    args = ap.parse_args()
    if args.case:
        _child(args.case, args.quick, args.smoke)
        return
    cases = [f"one:{k}" for k in ((8,) if args.smoke else (8, 16, 32, 64))]
    if not args.skip_ray:
        cases += ["ray:8"] if args.smoke else ["ray:32", "ray:64"]
    for case in cases:
        cmd = [sys.executable, __file__, "--case", case] + (["--quick"] if args.quick else []) + \
            (["--smoke"] if args.smoke else [])
        res = subprocess.run(cmd, capture_output=True, text=True)
        line = [x for x in res.stdout.splitlines() if x.startswith("{")]
        if res.returncode or not line:
            print(json.dumps({"bench": "noc_speed", "case": case, "error": res.stderr.strip()[-2000:]}))
        else:
            print(line[-1], flush=True)


if __name__ == "__main__":
    main()
