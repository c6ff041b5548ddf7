"""Speed of the chip model in one process. Prints JSON lines.

    python benchmarks/chip_speed.py            # packet and cycle NoC, 3 runs each
    python benchmarks/chip_speed.py --quick    # one run each, the cycle model cut off sooner
    python benchmarks/chip_speed.py --smoke    # one short run each: what the test suite runs

examples/kv_decode.toml (plasticine, continuous-batching decode) on the packet NoC (the
whole run) and on the cycle-level NoC (cut off at ``run.max_cycles``: the whole run takes
minutes there). Each run is ``rdasim run examples/kv_decode.toml --json`` in a fresh process,
as a user types it, so the end-to-end figure (the one beside the target) includes the
interpreter, the imports, loading the compiled kernels from their cache and the summary; the
simulate figure is the run's own ``wall_seconds`` (the simulation alone). Medians of the runs,
in simulated cycles per wall second and per CPU second of the process (the machine is shared:
the load average is printed beside each figure). Before: 7.6-8.3 s end to end on a quiet
machine (~400,000 cycles/s, main at ff6d8f8).
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

from cluster.errors import EXIT_RUN_STATUS  # noqa: E402 - after the path above

CONFIG = os.path.join(ROOT, "examples", "kv_decode.toml")
TARGETS = {"packet": 800_000, "cycle": 50_000}  # simulated cycles/s, one process
CYCLE_MODEL_CYCLES = 300_000  # run.max_cycles for the cycle-level NoC
SMOKE_CYCLES = 20_000  # --smoke: both models cut off here, one run each, no warm-up run
# the shape of the JSON lines (tests/test_benchmarks.py runs --smoke and checks it)
SMOKE_KEYS = (("bench", "noc", "runs", "sim_cycles", "status", "end_to_end_cycles_per_s", "target_cycles_per_s",
               "simulate_cycles_per_s", "same_result_hash"),)


def _overrides(model: str, quick: bool | str) -> list[str]:
    sets = ["--set", f"noc.model={model}"]
    if quick == "smoke":
        sets += ["--set", f"run.max_cycles={SMOKE_CYCLES}"]
    elif model == "cycle":
        sets += ["--set", f"run.max_cycles={CYCLE_MODEL_CYCLES // (3 if quick else 1)}"]
    return sets


def _one_run(model: str, quick: bool | str) -> dict:
    """``rdasim run examples/kv_decode.toml --json`` in a fresh process, as a user types it: its
    figures (the simulation's own wall time among them) plus its end-to-end wall and CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "cluster.cli", "run", CONFIG, "--json", "--quiet",
                          *_overrides(model, quick)], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, EXIT_RUN_STATUS["cut_off"]):  # the cycle model's runs are cut off
        raise SystemExit(f"chip_speed: the {model} run failed (exit {out.returncode}):\n{out.stderr}")
    s = json.loads(out.stdout.strip().splitlines()[-1])
    return {"sim_cycles": int(s["sim_cycles"]), "simulate_seconds": s["wall_seconds"], "status": s["status"],
            "result_hash": s["result_hash"], "end_to_end_seconds": wall,
            "end_to_end_cpu_seconds": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "load_average": os.getloadavg()[0]}


def measure(model: str, repeats: int, quick: bool | str) -> dict:
    runs = [_one_run(model, quick) for _ in range(repeats)]
    cycles = runs[0]["sim_cycles"]

    def med(key: str) -> float:
        return statistics.median(cycles / r[key] for r in runs)

    rate = med("end_to_end_seconds")
    return {
        "bench": "chip_speed", "config": "examples/kv_decode.toml", "noc": model, "runs": repeats,
        "sim_cycles": cycles, "status": runs[0]["status"],
        "end_to_end_cycles_per_s": round(rate), "target_cycles_per_s": TARGETS[model],
        "meets_target": rate >= TARGETS[model],
        "end_to_end_cycles_per_cpu_s": round(med("end_to_end_cpu_seconds")),
        "simulate_cycles_per_s": round(med("simulate_seconds")),
        "simulate_seconds": [round(r["simulate_seconds"], 2) for r in runs],
        "end_to_end_seconds": [round(r["end_to_end_seconds"], 2) for r in runs],
        "load_average": [round(r["load_average"], 2) for r in runs],
        "cpu_count": os.cpu_count(),
        "same_result_hash": len({r["result_hash"] for r in runs}) == 1, "result_hash": runs[0]["result_hash"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--smoke", action="store_true", help=f"one run of each model cut off at {SMOKE_CYCLES:,} cycles")
    ap.add_argument("--model", choices=sorted(TARGETS), action="append", help="only this NoC model (repeatable)")
    args = ap.parse_args()
    quick = "smoke" if args.smoke else args.quick
    if not args.smoke:
        _one_run("packet", True)  # compile or load the kernels once, outside the timed runs
    for model in args.model or ("packet", "cycle"):
        print(json.dumps(measure(model, 1 if quick else 3, quick)), flush=True)


if __name__ == "__main__":
    main()
