"""More shard actors than cores: 1 process against 3 or 4 Ray shards. JSON lines.

    python benchmarks/oversubscribed.py                      # every case, medians of 3
    python benchmarks/oversubscribed.py --cases race-cols3 --repeats 1
    python benchmarks/oversubscribed.py --smoke     # race-cols3 once, joining $RAY_ADDRESS if set (the test suite)

A debugging habit: ``--shards 3`` or ``4`` on a 2-core laptop. Each case runs ``rdasim run``
end to end as a user types it (a fresh process: imports, Ray's start, the pilot behind the
warning, the actors' start, the run), once in one process and once on Ray, alternately, so
both see the same machine; the figure is the Ray run's median wall time over the one
process's, beside the target (at most ``TARGET_SLOWDOWN`` times slower) and the load average.
Two Ray figures: ``ray``, the command as typed, which starts an embedded Ray and stops it
(3-4 s to start and 1.3 s to stop, Ray's own, against a 1.5 s run in one process), and
``ray_kept``, the same command joining a Ray kept running between commands (``ray start
--head`` once, then ``RAY_ADDRESS=auto``, as docs/run.md suggests for a debugging session; here
a process of this benchmark holds it, so that ending it stops no other Ray on the machine).
Results must be identical (``result_hash``). The Ray run's warning line (the cost model's
prediction for a count above the cores) is printed beside the measured figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TARGET_SLOWDOWN = 5.0  # Ray shards beyond the cores: at most this many times one process's wall time
TODAY = "6.0-12.7x slower quiet (9.7-20.3x under load), main at ff6d8f8"
SETTLE_SECONDS = 2.0  # a killed actor dies asynchronously: let it go before the next run
# case -> (example, shards, cut)
CASES = {
    "moe-cols3": ("moe_switch", 3, "cols"),
    "moe-blocks4": ("moe_switch", 4, "blocks"),
    "race-cols3": ("race", 3, "cols"),
    "race-blocks4": ("race", 4, "blocks"),
    "mixtral-cols3": ("moe_mixtral", 3, "cols"),
}


# the shapes of the JSON lines (tests/test_benchmarks.py runs --smoke and checks them)
SMOKE_KEYS = (("case", "run", "wall_seconds", "run_seconds", "epochs", "result_hash", "warnings"),
              ("case", "summary", "shards", "one_process_seconds_median", "ray_seconds_median", "slowdown",
               "ray_kept_seconds_median", "same_result_hash"))


def emit(row: dict) -> None:
    print(json.dumps(row), flush=True)


def run_cli(example: str, extra: list[str], env: dict | None = None) -> dict:
    """``rdasim run examples/<example>.toml`` in a fresh process: its wall time as a user sees it."""
    cmd = [sys.executable, "-m", "cluster.cli", "run", os.path.join("examples", f"{example}.toml"), "--json",
           "--quiet", *extra]
    t = time.perf_counter()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()[-2000:]}")
    summary = json.loads(res.stdout.strip().splitlines()[0])
    warnings = [x for x in res.stderr.splitlines() if x.startswith("rdasim: warning")]
    return {"wall_seconds": round(wall, 2), "run_seconds": round(summary["wall_seconds"], 2),
            "epochs": summary.get("epochs"), "result_hash": summary["result_hash"], "warnings": warnings}


HOLDER = """
import sys
from cluster.parallel.ray_env import init_ray
ray = init_ray()
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()  # until the benchmark closes it
"""


@contextlib.contextmanager
def kept_ray(smoke: bool = False):
    """A Ray kept running between commands, as ``ray start --head`` keeps one: yields the
    environment that makes ``rdasim`` join it (--smoke: the one in RAY_ADDRESS, if set)."""
    if smoke and os.environ.get("RAY_ADDRESS"):
        yield dict(os.environ)
        return
    if os.environ.get("RAY_ADDRESS"):
        sys.exit("oversubscribed: RAY_ADDRESS is set; unset it (the benchmark starts the Rays it measures)")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        address = (holder.stdout.readline() if holder.stdout else "").strip()
        if not address:
            sys.exit("oversubscribed: could not start the kept Ray")
        yield {**os.environ, "RAY_ADDRESS": address, "RAY_AUTH_MODE": "token"}  # Ray made this one's token
    finally:
        if holder.stdin:
            holder.stdin.close()
        holder.wait(timeout=60)


def measure(name: str, repeats: int, configs: list[tuple[str, list[str], dict | None]],
            settle: float = SETTLE_SECONDS) -> dict[str, list[dict]]:
    """``repeats`` rounds of ``configs`` (key, extra arguments, environment), one after another."""
    example, _, _ = CASES[name]
    runs: dict[str, list[dict]] = {key: [] for key, _, _ in configs}
    for _ in range(repeats):
        for key, extra, env in configs:
            r = run_cli(example, extra, env)
            runs[key].append(r)
            emit({"case": name, "run": key, **r, "load_average_1min": round(os.getloadavg()[0], 2)})
            if key != "one":
                time.sleep(settle)
    return runs


def summary(name: str, runs: dict[str, list[dict]], repeats: int, load_before: float) -> dict:
    example, shards, cut = CASES[name]
    one = statistics.median(r["wall_seconds"] for r in runs["one"])
    ray = statistics.median(r["wall_seconds"] for r in runs["ray"])
    kept = statistics.median(r["wall_seconds"] for r in runs["ray_kept"])
    hashes = {r["result_hash"] for k in runs for r in runs[k]}
    warned = runs["ray"][0]["warnings"]
    row = {"case": name, "summary": True, "example": f"examples/{example}.toml", "shards": shards, "cut": cut,
           "repeats": repeats, "one_process_seconds_median": one, "ray_seconds_median": ray,
           "slowdown": round(ray / one, 2), "target_slowdown_at_most": TARGET_SLOWDOWN,
           "meets_target": ray / one <= TARGET_SLOWDOWN,
           "ray_kept_seconds_median": kept, "slowdown_ray_kept": round(kept / one, 2),
           "meets_target_ray_kept": kept / one <= TARGET_SLOWDOWN, "today": TODAY,
           "same_result_hash": len(hashes) == 1,
           "ray_run_seconds_median": statistics.median(r["run_seconds"] for r in runs["ray"]),
           "ray_epochs": runs["ray"][0]["epochs"], "warning": warned[0] if warned else None,
           "cores": len(os.sched_getaffinity(0)),
           "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
    emit(row)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="moe-cols3,moe-blocks4,race-cols3,race-blocks4",
                    help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="race-cols3 once; the Ray runs join $RAY_ADDRESS if set")
    args = ap.parse_args()
    if args.smoke:
        args.cases, args.repeats = "race-cols3", 1
    settle = 0.0 if args.smoke else SETTLE_SECONDS
    names = args.cases.split(",")
    for name in names:
        if name not in CASES:
            sys.exit(f"unknown case {name!r}: one of {', '.join(CASES)}")
    load_before = os.getloadavg()[0]
    ray_args = {name: ["--shards", str(CASES[name][1]), "--cut", CASES[name][2], "--backend", "ray"]
                for name in names}
    runs = {}
    joined = args.smoke and bool(os.environ.get("RAY_ADDRESS"))  # --smoke in a Ray kept for it: no embedded start
    for name in names:  # no other Ray running: the command starts and stops its own
        embedded = [] if joined else [("ray", ray_args[name], None)]
        runs[name] = measure(name, args.repeats, [("one", [], None), *embedded], settle)
    with kept_ray(args.smoke) as kept_env:
        for name in names:
            runs[name].update(measure(name, args.repeats, [("ray_kept", ray_args[name], kept_env)], settle))
            if joined:
                runs[name]["ray"] = runs[name]["ray_kept"]  # the same Ray: one run stands for both
    for name in names:
        summary(name, runs[name], args.repeats, load_before)


if __name__ == "__main__":
    main()
