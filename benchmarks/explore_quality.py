"""How close `rdasim explore` gets to the exhaustive Pareto front, and how fast. Prints JSON lines.

    python benchmarks/explore_quality.py                 # 5 seeds, tpe (default), random, nsga2, tpe + halving
    python benchmarks/explore_quality.py --seeds 3 --optimizers tpe,random
    python benchmarks/explore_quality.py --smoke     # 8 points, one seed: what the test suite runs

The space: a short kv-decode on a 4 x 4 Plasticine (8 requests, one layer), MU bytes (4) x
policy (4) x block bytes (5, virtual only: a condition) x max batch (1-7) x on-OOM (stall,
evict) = 448 points, each a fraction of a second. Objectives: tokens/s (max), peak share of
MU bytes reserved (min), dynamic energy per token (min). The exhaustive answer is computed
once with the sweep machinery (`rdasim sweep`'s plan and runner, explicit [[points]] so the
sweep is exactly the conditional space) and cached in --data (a temp dir by default): a rerun
reads it back. Its feasible non-dominated points give the reference (worst feasible value of
each objective + 10 % of its range) and the exhaustive hypervolume.

Each optimiser then explores the same space for real (rdasim explore in-process: the runs are
simulated, a repeated config reused) for --budget trials, per seed; its hypervolume after each
trial, as a fraction of the exhaustive one, is the curve; the median over seeds is reported
at 5 %, 10 %, 15 % of the points' evaluations, with the trials each needs to reach 0.9 and 0.95.
Multi-fidelity (TPE with successive halving: one cheap rung cut at the 25th percentile of the
runs' cycles by default (--cut-percentile), eta 3, twice the trials) is reported against its
simulated full-fidelity runs (uncut; a cut run that finished before its cap is one) and the
cycles it simulated until it reached 0.95 (cut runs included), next to TPE's: the target's
"cycle-level runs" are read as full-fidelity runs, and the cycles say what the cut runs cost.

Targets: the default optimiser >= 0.95 of the exhaustive hypervolume within 10 % of
the points' evaluations; fewer trials than random search to reach 0.9; with multi-fidelity,
the same with half the cycle-level runs.
"""

from __future__ import annotations

import argparse
import atexit
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

BASE = {
    "chip": {"preset": "plasticine", "rows": 4, "cols": 4, "mu_bytes": "32KiB"},
    "noc": {"model": "packet"},
    "memory": {"policy": "virtual", "reclaim": "refcount-gated", "block_bytes": "1KiB", "on_oom": "stall"},
    "workload": {"kind": "kv-decode", "decode": {
        "requests": 8, "max_batch": 4, "layers": 1, "heads": 1, "head_dim": 32, "dtype_bytes": 2,
        "prompt_tokens": {"dist": "uniform", "min": 16, "max": 64},
        "output_tokens": {"dist": "uniform", "min": 8, "max": 24}}},
    "run": {"seed": 1},
}
SPACE = {
    "chip.mu_bytes": {"type": "ordinal", "values": ["8KiB", "16KiB", "32KiB", "64KiB"]},
    "memory.policy": {"type": "categorical", "values": ["virtual", "static-single", "static-multi", "realloc-copy"]},
    "memory.block_bytes": {"type": "ordinal", "values": ["256B", "512B", "1KiB", "2KiB", "4KiB"],
                           "when": {"memory.policy": "virtual"}},
    "workload.decode.max_batch": {"type": "int", "low": 1, "high": 7},
    "memory.on_oom": {"type": "categorical", "values": ["stall", "evict"]},
}
# --smoke (tests/test_benchmarks.py): 8 points of the same space, one seed, three optimisers
SMOKE_SPACE = {
    "chip.mu_bytes": {"type": "ordinal", "values": ["16KiB", "32KiB"]},
    "memory.policy": {"type": "categorical", "values": ["virtual", "static-single"]},
    "workload.decode.max_batch": {"type": "int", "low": 2, "high": 3},
}
SMOKE_KEYS = (("exhaustive_points", "computed_now", "seconds"),
              ("points", "feasible", "front", "exhaustive_hypervolume", "budget_trials"),
              ("optimizer", "seed", "hv_at_10pct", "hv_final", "full_runs", "runs"),
              ("optimizer", "seeds", "median_hv_fraction", "median_trials_to_0.9", "median_full_runs_to_0.95"),
              ("targets",))
OBJECTIVES = [{"metric": "tokens_per_second", "direction": "maximize"},
              {"metric": "peak_mu_reserved", "direction": "minimize"},
              {"metric": "energy_per_token_joules", "direction": "minimize"}]
TARGETS = {"default_hv_at_10pct": 0.95, "fraction_for_trials_to": 0.9, "multi_fidelity_full_run_share": 0.5}


def _spec(budget: int, optimizer: str, seed: int, fidelity: dict | None = None, space: dict = SPACE):
    from cluster.explore.spec import parse_explore

    explore = {"optimizer": optimizer, "budget": budget, "seed": seed, "parallel": 1, "space": space,
               "objectives": OBJECTIVES}
    if fidelity:
        explore["fidelity"] = fidelity
    return parse_explore({"base": BASE, "explore": explore}, Path("."), "explore_quality")


def exhaustive(data: Path, space: dict = SPACE) -> tuple[np.ndarray, list[int]]:
    """Every point's objectives (NaN rows: infeasible) and completed runs' cycles, from the cached sweep."""
    from cluster.sweep.dataset import read_dataset
    from cluster.sweep.plan import plan_from_spec
    from cluster.sweep.runner import run_sweep
    from cluster.sweep.spec import parse_spec

    points = list(_spec(1, "tpe", 0, space=space).space.points())
    spec, issues = parse_spec({"sweep": {"name": "explore_quality", "command": "run"}, "base": BASE,
                               "points": points}, Path("."), "explore_quality sweep")
    plan = plan_from_spec(spec, issues)
    start = time.perf_counter()
    summary = run_sweep(plan, data, quiet=True, in_process=True, mix_code=True)  # the cache: stored points skipped
    rows = read_dataset(data / "explore_quality").to_pylist()
    print(json.dumps({"exhaustive_points": len(points), "computed_now": summary.computed,
                      "seconds": round(time.perf_counter() - start, 1), "data": str(data)}), flush=True)
    values = np.array([[r[o["metric"]] if r["status"] == "completed" and r[o["metric"]] is not None else math.nan
                        for o in OBJECTIVES] for r in rows], dtype=float)
    cycles = [r["sim_cycles"] for r in rows if r["status"] == "completed"]
    return values, cycles


def _losses(values: np.ndarray) -> np.ndarray:
    from cluster.explore.pareto import as_losses

    return as_losses(values, [o["direction"] == "maximize" for o in OBJECTIVES])


def curves(spec, out: Path, ref: np.ndarray, total: float) -> dict:
    """One exploration: its hypervolume fraction after each trial and after each simulated full-fidelity run
    (uncut: a cut run that finished before its cap counts too; a reused result does not), and its simulated
    cycles (every run, cut ones included)."""
    from cluster.explore.driver import Options, run_explore
    from cluster.explore.pareto import hypervolume_history
    from cluster.explore.trials import FULL, read_runs

    run_explore(spec, out, Options(in_process=True, quiet=True))
    runs, table = read_runs(out / "trials", [o["metric"] for o in OBJECTIVES])
    simulated = [node not in ("cache", None) for node in table["point_node"].to_pylist()]
    nan = np.full(len(OBJECTIVES), math.nan)
    best: dict[int, np.ndarray] = {}  # trial -> its feasible full result (NaN if none)
    full_runs = []  # the simulated full-fidelity runs' results, in order
    spent, cycles = [], 0  # cycles simulated up to each row (stored order: by trial, then rung)
    for r, ran, c in zip(runs, simulated, table["sim_cycles"].to_pylist()):
        loss = _losses(np.array([r.values]))[0] if r.fidelity == FULL and r.feasible else nan
        best.setdefault(r.trial, nan)
        cycles += (c or 0) if ran else 0
        spent.append(cycles)
        if r.fidelity == FULL:
            best[r.trial] = loss
            if ran:
                full_runs.append(loss)
    by_trial = hypervolume_history(np.array([best[t] for t in sorted(best)]), ref) / total
    by_full = hypervolume_history(np.array(full_runs).reshape(-1, len(OBJECTIVES)), ref) / total
    by_row = hypervolume_history(np.array([_losses(np.array([r.values]))[0] if r.fidelity == FULL and r.feasible
                                           else nan for r in runs]), ref) / total
    reached = _first(by_row.tolist(), 0.95)
    cycles_to = spent[int(reached) - 1] if reached != math.inf else math.inf
    return {"by_trial": by_trial.tolist(), "by_full_run": by_full.tolist(), "cycles": cycles,
            "runs": sum(simulated), "cycles_to_0.95": cycles_to}


def _first(curve: list[float], level: float) -> float:
    return next((i + 1 for i, v in enumerate(curve) if v >= level - 1e-12), math.inf)


def _median_at(curves_: list[list[float]], k: int) -> float:
    return statistics.median(c[min(k, len(c)) - 1] if c else 0.0 for c in curves_)


def _median_first(curves_: list[list[float]], level: float) -> float:
    return statistics.median(_first(c, level) for c in curves_)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--optimizers", default="tpe,random,nsga2,tpe+halving")
    p.add_argument("--budget", type=float, default=0.15, help="trials as a share of the points (default 0.15)")
    p.add_argument("--cut-percentile", type=float, default=25.0,
                   help="multi-fidelity: the cheap rung's run.max_cycles, as a percentile of the runs' cycles")
    p.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "rdasim-explore-quality",
                   help="where the exhaustive sweep is cached")
    p.add_argument("--smoke", action="store_true", help="8 points, one seed, tpe, random and tpe+halving")
    args = p.parse_args(argv)
    space = SPACE
    if args.smoke:
        space, args.seeds, args.optimizers, args.budget = SMOKE_SPACE, 1, "tpe,random,tpe+halving", 0.5
        args.data = Path(tempfile.mkdtemp(prefix="rdasim-explore-smoke-"))
        atexit.register(shutil.rmtree, args.data, True)  # a smoke run keeps no cache
    from cluster.explore.pareto import hypervolume, reference_point

    values, cycles = exhaustive(args.data, space)
    good = _losses(values[np.all(np.isfinite(values), axis=1)])
    ref = reference_point(good)
    total = hypervolume(good, ref)
    n = len(values)
    budget, tenth = max(4, round(args.budget * n)), max(1, round(0.1 * n))
    cut = int(np.percentile(cycles, args.cut_percentile))
    print(json.dumps({"points": n, "feasible": len(good), "front": int(np.sum(_front_mask(good))),
                      "reference_losses": ref.tolist(), "exhaustive_hypervolume": total, "budget_trials": budget,
                      "ten_percent": tenth, "cut_cycles": cut}), flush=True)
    results: dict[str, list[dict]] = {}
    for name in args.optimizers.split(","):
        optimizer, halving = name.split("+")[0], name.endswith("+halving")
        fidelity = {"cycles": [cut], "eta": 3} if halving else None
        for seed in range(args.seeds):
            with tempfile.TemporaryDirectory(prefix="rdasim-explore-") as out:
                start = time.perf_counter()
                spec = _spec(budget * (2 if halving else 1), optimizer, seed, fidelity, space)
                c = curves(spec, Path(out), ref, total)
                c["seconds"] = time.perf_counter() - start
            results.setdefault(name, []).append(c)
            print(json.dumps({"optimizer": name, "seed": seed, "hv_at_10pct": c["by_trial"][tenth - 1],
                              "hv_final": c["by_trial"][-1], "full_runs": len(c["by_full_run"]), "runs": c["runs"],
                              "seconds": round(c["seconds"], 1)}), flush=True)
        runs = results[name]
        by_trial = [r["by_trial"] for r in runs]
        summary = {"optimizer": name, "seeds": len(runs),
                   "median_hv_fraction": {f"{pct}%": _median_at(by_trial, max(1, round(pct / 100 * n)))
                                          for pct in (5, 10, 15) if round(pct / 100 * n) <= len(by_trial[0])},
                   "median_trials_to_0.9": _median_first(by_trial, 0.9),
                   "median_trials_to_0.95": _median_first(by_trial, 0.95),
                   "median_full_runs_to_0.95": _median_first([r["by_full_run"] for r in runs], 0.95),
                   "median_simulated_cycles": statistics.median(r["cycles"] for r in runs),
                   "median_runs": statistics.median(r["runs"] for r in runs),
                   "median_cycles_to_0.95": statistics.median(r["cycles_to_0.95"] for r in runs),
                   "median_seconds": statistics.median(r["seconds"] for r in runs)}
        print(json.dumps(summary), flush=True)
        results[name + ":summary"] = [summary]
    _targets(results, tenth)
    return 0


def _front_mask(losses: np.ndarray) -> np.ndarray:
    from cluster.explore.pareto import non_dominated

    return non_dominated(losses)


def _targets(results: dict, tenth: int) -> None:
    """The issue's targets beside the measured figures."""
    summary = {k.split(":")[0]: v[0] for k, v in results.items() if k.endswith(":summary")}
    out: dict = {"targets": TARGETS}
    if "tpe" in summary:
        tpe = summary["tpe"]
        out["default_hv_at_10pct"] = tpe["median_hv_fraction"].get("10%")
        out["default_hv_at_10pct_met"] = (out["default_hv_at_10pct"] or 0) >= TARGETS["default_hv_at_10pct"]
        if "random" in summary:
            out["trials_to_0.9"] = {"tpe": tpe["median_trials_to_0.9"],
                                    "random": summary["random"]["median_trials_to_0.9"]}
            out["fewer_than_random_met"] = tpe["median_trials_to_0.9"] < summary["random"]["median_trials_to_0.9"]
        if "tpe+halving" in summary:
            mf = summary["tpe+halving"]
            out["full_runs_to_0.95"] = {"tpe": tpe["median_full_runs_to_0.95"],
                                        "tpe+halving": mf["median_full_runs_to_0.95"]}
            out["multi_fidelity_half_met"] = mf["median_full_runs_to_0.95"] <= \
                TARGETS["multi_fidelity_full_run_share"] * tpe["median_full_runs_to_0.95"]
            out["simulated_cycles_to_0.95"] = {"tpe": tpe["median_cycles_to_0.95"],
                                               "tpe+halving": mf["median_cycles_to_0.95"]}
    print(json.dumps(out, default=str), flush=True)


if __name__ == "__main__":
    sys.exit(main())
