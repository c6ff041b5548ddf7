"""Speed of the chip model in one process (issue 23 item 4). Prints JSON lines.

    python benchmarks/chip_speed.py            # packet and cycle NoC, 3 runs each
    python benchmarks/chip_speed.py --quick    # one run each, the cycle model cut off sooner

examples/kv_decode.toml (plasticine, continuous-batching decode) on the packet NoC (the
whole run) and on the cycle-level NoC (cut off at ``run.max_cycles``: the whole run takes
minutes there). Each run is a fresh process doing what ``rdasim run`` does (load the config,
simulate, summarise, no files written), so the end-to-end figure includes the interpreter,
the imports and loading the compiled kernels from their cache; the simulate figure times
``simulate_chip`` alone. Medians of the runs, in simulated cycles per wall second (beside the
targets) and per CPU second of the process (the machine is shared: the load average is
printed beside each figure).
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

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

CONFIG = os.path.join(ROOT, "examples", "kv_decode.toml")
TARGETS = {"packet": 800_000, "cycle": 50_000}  # simulated cycles/s, one process (issue 23 item 4)
CYCLE_MODEL_CYCLES = 300_000  # run.max_cycles for the cycle-level NoC


def _overrides(model: str, quick: bool) -> list[str]:
    if model == "packet":
        return []
    return [f"run.max_cycles={CYCLE_MODEL_CYCLES // (3 if quick else 1)}"]


def _child(model: str, quick: bool) -> None:
    """One run as ``rdasim run`` does it; prints its figures as one JSON line."""
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, chip_config
    from cluster.jobs.chip import simulate_chip

    cfg = load(RUN_SCHEMA, CONFIG, _overrides(model, quick), [("noc.model", model)])
    chip = chip_config(cfg)
    run = cfg["run"]
    t, c = time.perf_counter(), time.process_time()
    done = simulate_chip(chip, run["shards"], run["cut"], run["backend"], run["epoch"], run["address"])
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    s = done.summary
    print(json.dumps({"sim_cycles": int(s["sim_cycles"]), "simulate_seconds": wall, "simulate_cpu_seconds": cpu,
                      "result_hash": s["result_hash"], "status": s["status"]}))


def _one_run(model: str, quick: bool) -> dict:
    """A fresh process: its figures plus its end-to-end wall and CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", model] + (["--quick"] if quick else []),
                         capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        raise SystemExit(f"chip_speed: the {model} run failed:\n{out.stderr}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r.update(end_to_end_seconds=wall, end_to_end_cpu_seconds=(after.ru_utime - before.ru_utime)
             + (after.ru_stime - before.ru_stime), load_average=os.getloadavg()[0])
    return r


def measure(model: str, repeats: int, quick: bool) -> dict:
    runs = [_one_run(model, quick) for _ in range(repeats)]
    cycles = runs[0]["sim_cycles"]

    def med(key: str) -> float:
        return statistics.median(cycles / r[key] for r in runs)

    sim_rate = med("simulate_seconds")
    return {
        "bench": "chip_speed", "config": "examples/kv_decode.toml", "noc": model, "runs": repeats,
        "sim_cycles": cycles, "status": runs[0]["status"],
        "simulate_cycles_per_s": round(sim_rate), "target_cycles_per_s": TARGETS[model],
        "meets_target": sim_rate >= TARGETS[model],
        "simulate_cycles_per_cpu_s": round(med("simulate_cpu_seconds")),
        "end_to_end_cycles_per_s": round(med("end_to_end_seconds")),
        "end_to_end_cycles_per_cpu_s": round(med("end_to_end_cpu_seconds")),
        "simulate_seconds": [round(r["simulate_seconds"], 2) for r in runs],
        "simulate_cpu_seconds": [round(r["simulate_cpu_seconds"], 2) for r in runs],
        "end_to_end_seconds": [round(r["end_to_end_seconds"], 2) for r in runs],
        "load_average": [round(r["load_average"], 2) for r in runs],
        "cpu_count": os.cpu_count(),
        "same_result_hash": len({r["result_hash"] for r in runs}) == 1, "result_hash": runs[0]["result_hash"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--model", choices=sorted(TARGETS), action="append", help="only this NoC model (repeatable)")
    ap.add_argument("--child", choices=sorted(TARGETS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.quick)
        return
    _one_run("packet", True)  # compile or load the kernels once, outside the timed runs
    for model in args.model or ("packet", "cycle"):
        print(json.dumps(measure(model, 1 if args.quick else 3, args.quick)), flush=True)


if __name__ == "__main__":
    main()
