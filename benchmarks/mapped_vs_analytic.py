"""Mapped execution against DFModel: per partition, simulated and analytic seconds. JSON lines.

    python benchmarks/mapped_vs_analytic.py             # the three mapped examples and the presets
    python benchmarks/mapped_vs_analytic.py --quick     # the examples only
    python benchmarks/mapped_vs_analytic.py --smoke     # a small mapped MoE layer: what the test suite runs

For every mapped example (examples/mapped_*.toml) and for each published DFModel preset
whose workload fits a single RDA (its graph mapped onto one plasticine or one sn40l-like
chip instead of its multi-chip system), one line per partition: simulated and analytic
seconds and their ratio, which of DFModel's terms bounds it, the kernels in it; and one
line per run: wall seconds, messages per wall second, simulated cycles per wall second.
Ratios outside [0.9, 1.5] are the findings: the docs (docs/run.md, "Mapped execution")
say where each comes from.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BAND = (0.9, 1.5)  # ratios inside it need no explanation
MAX_MESSAGES = 3_000_000  # a preset whose run would send more is reported, not run
# --smoke (tests/test_benchmarks.py): examples/mapped_moe.toml on 64 tokens of hidden 256, no presets
SMOKE_SETS = ["workload.dataflow.graph.moe.seq=64", "workload.dataflow.graph.moe.hidden=256"]
SMOKE_KEYS = (("bench", "case", "partition", "kernels", "simulated_seconds", "analytic_seconds", "ratio", "bound"),
              ("bench", "case", "run", "status", "seconds_per_batch_simulated", "seconds_per_batch_analytic", "ratio"))


def emit(row: dict) -> None:
    print(json.dumps(row), flush=True)


def run_config(path: str | None = None, raw: dict | None = None, label: str = "",
               sets: list[str] | None = None) -> None:
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, chip_config

    simulate_and_emit(chip_config(load(RUN_SCHEMA, path, sets, raw=raw)), label)


def simulate_and_emit(chip, label: str) -> None:
    """Run a mapped chip config: a line per partition (simulated vs DFModel) and one for the run."""
    from cluster.jobs.chip import simulate_chip

    t = time.perf_counter()
    done = simulate_chip(chip)
    s, tables = done.summary, done.tables
    wall = time.perf_counter() - t
    parts = tables["partitions"]
    for i in range(len(parts["partition"])):
        ratio = parts["ratio"][i]
        emit({"bench": "mapped_vs_analytic", "case": label, "partition": parts["index"][i],
              "kernels": s["partitions"][i]["kernels"], "simulated_seconds": parts["simulated_seconds"][i],
              "analytic_seconds": parts["analytic_seconds"][i], "ratio": round(ratio, 3), "bound": parts["bound"][i],
              "in_band": BAND[0] <= ratio <= BAND[1], "setup_seconds": parts["setup_seconds"][i]})
    emit({"bench": "mapped_vs_analytic", "case": label, "run": True, "status": s.get("status", ""),
          "completed": s["completed"], "seconds_per_batch_simulated": s["seconds_per_batch_simulated"],
          "seconds_per_batch_analytic": s["seconds_per_batch_analytic"],
          "ratio": round(s["seconds_per_batch_simulated"] / s["seconds_per_batch_analytic"], 3),
          "wall_seconds": round(wall, 2), "sim_cycles": s["sim_cycles"], "messages": s["messages_total"],
          "messages_per_second": round(s["messages_total"] / wall), "cycles_per_second": round(s["sim_cycles"] / wall)})


def estimate_messages(params) -> int:
    """Messages a mapped run would send, roughly: per tile, every CU's reads, writes and credits."""
    total = 0
    for part in params.partitions:
        per_tile = sum(len(s.reads) * 2 + len(s.writes) + len(s.credits_to) + 4 for s in part.slots)
        total += part.tiles * per_tile
    return total * params.passes


def presets() -> None:
    """Each DFModel preset's graph mapped onto one RDA, run if it fits and is not too big."""
    from mapping.chips import RDA_PRESETS
    from mapping.placement import PlacementError, place_on_grid
    from mapping.presets import SPECS, preset
    from mapping.solver import map_workload
    from mapping.systems import LinkKind, NetworkDim, Parallelism, System
    from sim.workloads.dataflow import DataflowParams, plan_addresses

    for name in SPECS:
        problem = preset(name)
        for chip in ("plasticine", "sn40l-like"):
            spec = RDA_PRESETS[chip]
            system = System(1, spec.dfmodel(), (NetworkDim(LinkKind.RING, 1, 1.0, Parallelism.TP),))
            t = time.perf_counter()
            plan = map_workload(problem.workload, system, problem.model, time_limit=20.0)
            row = {"bench": "mapped_vs_analytic", "case": f"preset {name} on one {chip}",
                   "mapped": plan.feasible, "solver_seconds": round(time.perf_counter() - t, 2)}
            if not plan.feasible:
                emit({**row, "fits_one_chip": False, "reason": plan.reason})
                continue
            try:
                placement = plan_addresses(place_on_grid(plan, spec), spec.mu_bytes)
            except PlacementError as exc:
                emit({**row, "fits_one_chip": False, "reason": str(exc)})
                continue
            params = DataflowParams.from_plan(plan, placement, spec)
            n = estimate_messages(params)
            if n > MAX_MESSAGES:
                emit({**row, "fits_one_chip": True, "simulated": False, "estimated_messages": n,
                      "reason": f"about {n:,} messages: more than this benchmark's {MAX_MESSAGES:,}"})
                continue
            emit({**row, "fits_one_chip": True, "estimated_messages": n})
            run_plan_here(plan, placement, spec, params, row["case"])


def run_plan_here(plan, placement, spec, params, label: str) -> None:
    import dataclasses

    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, chip_config

    base = chip_config(load(RUN_SCHEMA, raw={"chip": {"preset": spec.name}, "noc": {"model": "packet"}}))
    simulate_and_emit(dataclasses.replace(base, workload=params), label)


def main() -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the mapped examples only")
    ap.add_argument("--smoke", action="store_true", help="a small mapped_moe.toml only: " + " ".join(SMOKE_SETS))
    args = ap.parse_args()
    if args.smoke:
        run_config(os.path.join(ROOT, "examples", "mapped_moe.toml"), label="mapped_moe.toml (smoke)", sets=SMOKE_SETS)
        return 0
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "mapped_*.toml"))):
        run_config(path, label=os.path.basename(path))
    if not args.quick:
        presets()
    return 0


if __name__ == "__main__":
    sys.exit(main())
