"""More shard actors than cores (issue 23, item 3): 1 process against 3 or 4 Ray shards. JSON lines.

    python benchmarks/oversubscribed.py                      # every case, medians of 3
    python benchmarks/oversubscribed.py --cases race-cols3 --repeats 1

A debugging habit: ``--shards 3`` or ``4`` on a 2-core laptop. Each case runs ``rdasim run``
end to end as a user types it (a fresh process: imports, Ray's start, the pilot behind the
warning, the actors' start, the run), once in one process and once on Ray, alternately, so
both see the same machine; the figure is the Ray run's median wall time over the one
process's, beside the target (at most ``TARGET_SLOWDOWN`` times slower) and the load average.
Results must be identical (``result_hash``). The Ray run's warning line (the cost model's
prediction for a count above the cores) is printed beside the measured figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TARGET_SLOWDOWN = 5.0  # Ray shards beyond the cores: at most this many times one process's wall time
TODAY = "6.0-12.7x slower quiet (9.7-20.3x under load), issue 23 on main at ff6d8f8"
SETTLE_SECONDS = 2.0  # a killed actor dies asynchronously: let it go before the next run
# case -> (example, shards, cut)
CASES = {
    "moe-cols3": ("moe_switch", 3, "cols"),
    "moe-blocks4": ("moe_switch", 4, "blocks"),
    "race-cols3": ("race", 3, "cols"),
    "race-blocks4": ("race", 4, "blocks"),
    "mixtral-cols3": ("moe_mixtral", 3, "cols"),
}


def emit(row: dict) -> None:
    print(json.dumps(row), flush=True)


def run_cli(example: str, extra: list[str]) -> dict:
    """``rdasim run examples/<example>.toml`` in a fresh process: its wall time as a user sees it."""
    cmd = [sys.executable, "-m", "cluster.cli", "run", os.path.join("examples", f"{example}.toml"), "--json",
           "--quiet", *extra]
    t = time.perf_counter()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()[-2000:]}")
    summary = json.loads(res.stdout.strip().splitlines()[0])
    warnings = [x for x in res.stderr.splitlines() if x.startswith("rdasim: warning")]
    return {"wall_seconds": round(wall, 2), "run_seconds": round(summary["wall_seconds"], 2),
            "epochs": summary.get("epochs"), "result_hash": summary["result_hash"], "warnings": warnings}


def run_case(name: str, repeats: int) -> dict:
    example, shards, cut = CASES[name]
    ray_args = ["--shards", str(shards), "--cut", cut, "--backend", "ray"]
    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict]] = {"one": [], "ray": []}
    for _ in range(repeats):
        for key, extra in (("one", []), ("ray", ray_args)):
            r = run_cli(example, extra)
            runs[key].append(r)
            emit({"case": name, "run": key, **r, "load_average_1min": round(os.getloadavg()[0], 2)})
            if key == "ray":
                time.sleep(SETTLE_SECONDS)
    one = statistics.median(r["wall_seconds"] for r in runs["one"])
    ray = statistics.median(r["wall_seconds"] for r in runs["ray"])
    hashes = {r["result_hash"] for k in runs for r in runs[k]}
    warned = runs["ray"][0]["warnings"]
    row = {"case": name, "summary": True, "example": f"examples/{example}.toml", "shards": shards, "cut": cut,
           "repeats": repeats, "one_process_seconds_median": one, "ray_seconds_median": ray,
           "slowdown": round(ray / one, 2), "target_slowdown_at_most": TARGET_SLOWDOWN,
           "meets_target": ray / one <= TARGET_SLOWDOWN, "today": TODAY, "same_result_hash": len(hashes) == 1,
           "ray_run_seconds_median": statistics.median(r["run_seconds"] for r in runs["ray"]),
           "ray_epochs": runs["ray"][0]["epochs"], "warning": warned[0] if warned else None,
           "cores": len(os.sched_getaffinity(0)),
           "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
    emit(row)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="moe-cols3,moe-blocks4,race-cols3,race-blocks4",
                    help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    names = args.cases.split(",")
    for name in names:
        if name not in CASES:
            sys.exit(f"unknown case {name!r}: one of {', '.join(CASES)}")
    for name in names:
        run_case(name, args.repeats)


if __name__ == "__main__":
    main()
