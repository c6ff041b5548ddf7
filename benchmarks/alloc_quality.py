"""Allocator benchmark: static planners on the MiniMalloc challenging instances, free-list speed.

Prints one JSON object per line (progress goes to stderr):

- ``"bench": "plan"``, one line per instance and method: peak, lower bound (max live
  bytes), ratio = peak / lower bound, proved_optimal, seconds (whole run, the exact
  search spends its budget trying to go lower), seconds_to_fit (when a packing under the
  capacity in the file name was first held), nodes, validity and the issue's target;
- ``"bench": "freelist"``, one line per policy and direction: allocate+free pairs per
  second with 1,000 live blocks (median of several runs; wall clock, and CPU time of this
  process, with the load average when it started), against 200,000/s.

Targets: exact fits every instance in 1,048,576 bytes within 60 s; greedy and
layergroup within 1.35 x the lower bound in under a second.

    python benchmarks/alloc_quality.py [--budget 60] [--data DIR] [--methods exact,greedy]
    python benchmarks/alloc_quality.py --smoke      # in seconds: what the test suite runs
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

from allocators.dsa_csv import read_csv
from allocators.freelist import FreeList
from allocators.planner import METHODS, plan

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT / "benchmarks" / "data" / "minimalloc-challenging"
RATIO_TARGET = 1.35
HEURISTIC_SECONDS = 1.0
EXACT_SECONDS = 60.0
PAIRS_TARGET = 200_000
# --smoke (tests/test_benchmarks.py): the instance a clone carries, every planner briefly, a short free-list run
SMOKE_DATA = ROOT / "tests" / "data" / "minimalloc"
SMOKE_KEYS = (("bench", "instance", "method", "peak", "lower_bound", "ratio", "valid", "meets_target"),
              ("bench", "policy", "top_down", "pairs_per_second", "cpu_pairs_per_second", "meets_target"))


def emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def bench_plans(files: list[Path], methods: list[str], budget: float, repeats: int, say) -> None:
    for path in files:
        problem, _ = read_csv(path)
        capacity = int(path.name.split(".")[1])
        for method in methods:
            runs = []
            for _ in range(repeats):
                say(f"{path.name}: {method} ...")
                runs.append(plan(problem, method, capacity=capacity, budget=budget))
            result = runs[0]  # every run gives the same packing; only the times vary
            seconds = statistics.median(r.seconds for r in runs)
            fit = [r.seconds_to_fit for r in runs if r.seconds_to_fit is not None]
            to_fit = statistics.median(fit) if len(fit) == len(runs) else None
            if method == "exact":
                target = f"peak <= {capacity} within {EXACT_SECONDS:.0f} s"
                meets = result.fits and to_fit is not None and to_fit <= EXACT_SECONDS
            else:
                target = f"ratio <= {RATIO_TARGET} in < {HEURISTIC_SECONDS:.0f} s"
                meets = result.ratio <= RATIO_TARGET and seconds < HEURISTIC_SECONDS
            emit({
                "bench": "plan", "instance": path.name.split(".")[0], "method": method,
                "buffers": len(problem), "capacity": capacity, "peak": result.peak,
                "lower_bound": result.lower_bound, "ratio": round(result.ratio, 4),
                "peak_over_capacity": round(result.peak / capacity, 4),
                "proved_optimal": result.proved_optimal, "seconds": round(seconds, 3),
                "seconds_to_fit": None if to_fit is None else round(to_fit, 3),
                "fits": result.fits, "valid": result.valid, "nodes": result.nodes,
                "budget": budget if method == "exact" else None, "repeats": repeats,
                "target": target, "meets_target": bool(meets and result.valid),
            })


def freelist_pairs_per_second(policy: str, top_down: bool, live: int, pairs: int, seed: int) -> tuple[float, float]:
    """Free a random live block and allocate a new one, ``pairs`` times, with ``live`` blocks live.

    Returns pairs per second of wall-clock time and of this process's CPU time (the second
    is less sensitive to other jobs sharing the cores)."""
    rng = random.Random(seed)
    fl = FreeList(1 << 30, alignment=32, policy=policy)
    blocks = [fl.allocate(rng.randrange(32, 65536), top_down) for _ in range(live)]
    sizes = [rng.randrange(32, 65536) for _ in range(pairs)]
    victims = [rng.randrange(live) for _ in range(pairs)]
    allocate, free = fl.allocate, fl.free
    wall, cpu = time.perf_counter(), time.process_time()
    for size, i in zip(sizes, victims):
        free(blocks[i])
        blocks[i] = allocate(size, top_down)
    return pairs / (time.perf_counter() - wall), pairs / (time.process_time() - cpu)


def bench_freelist(runs: int, pairs: int, say) -> None:
    for policy in FreeList.POLICIES:
        for top_down in (False, True):
            say(f"free list: {policy}, {'top-down' if top_down else 'bottom-up'} ...")
            load = os.getloadavg()[0]
            rates = [freelist_pairs_per_second(policy, top_down, 1000, pairs, seed) for seed in range(runs)]
            wall = [w for w, _ in rates]
            median = statistics.median(wall)
            emit({
                "bench": "freelist", "policy": policy, "top_down": top_down, "live_blocks": 1000,
                "pairs": pairs, "runs": runs, "pairs_per_second": round(median),
                "min": round(min(wall)), "max": round(max(wall)),
                "cpu_pairs_per_second": round(statistics.median(c for _, c in rates)),
                "load_average": round(load, 2), "cpus": os.cpu_count(),
                "target": PAIRS_TARGET, "meets_target": median >= PAIRS_TARGET,
            })


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="directory of MiniMalloc CSV instances")
    ap.add_argument("--instances", default="", help="comma-separated letters (default: all)")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated planners")
    ap.add_argument("--budget", type=float, default=EXACT_SECONDS, help="exact search budget per instance, s")
    ap.add_argument("--repeats", type=int, default=1, help="planner runs per instance (median time)")
    ap.add_argument("--freelist-runs", type=int, default=5, help="free-list runs per configuration (median)")
    ap.add_argument("--pairs", type=int, default=200_000, help="allocate+free pairs per free-list run")
    ap.add_argument("--skip-plans", action="store_true")
    ap.add_argument("--skip-freelist", action="store_true")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    ap.add_argument("--smoke", action="store_true",
                    help="tests/data/minimalloc's instance, a 1 s exact budget, one free-list run of 2,000 pairs")
    args = ap.parse_args(argv)
    if args.smoke:
        args.data, args.budget, args.freelist_runs, args.pairs, args.quiet = SMOKE_DATA, 1.0, 1, 2000, True
    say = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    if not args.skip_plans:
        files = sorted(args.data.glob("*.csv"))
        if args.instances:
            wanted = set(args.instances.split(","))
            files = [f for f in files if f.name.split(".")[0] in wanted]
        if not files:
            print(f"no instances in {args.data}", file=sys.stderr)
            return 2
        methods = [m for m in args.methods.split(",") if m]
        bench_plans(files, methods, args.budget, args.repeats, say)
    if not args.skip_freelist:
        bench_freelist(args.freelist_runs, args.pairs, say)
    return 0


if __name__ == "__main__":
    sys.exit(main())
