"""Systems of chips: how fast they simulate, in one process and spread over Ray actors. JSON lines.

    python benchmarks/system_speed.py                 # every case, medians of 3
    python benchmarks/system_speed.py --repeats 1 --cases box64,box1024
    python benchmarks/system_speed.py --layer gpt2    # the grid case on a GPT-2-small layer (slower)
    python benchmarks/system_speed.py --smoke         # 2 small grid chips and 16 box chips, once (the test suite)

Cases:

- ``grid8``: 8 grid-fidelity plasticine chips on a ring running a GPT layer mapped with TP = 8
  (examples/system_tp_ring.toml with 8 chips): one process against 2 Ray actors of 4 chips each,
  run alternately so both see the same machine; target 2 actors >= 1.85x faster on the GPT-2
  layer (2.0x is the limit on 2 cores), >= 1.7x on the small one, same result hash.
  The actors are kept warm between the runs (``warm_shards``), as a driver running one run
  after another on the same Ray keeps them; ``--cold`` starts new ones for every run.
- ``box64``, ``box1024``: GPT-3 1T on 64 and 1,024 SN30-like box chips (DFModel's preset
  gpt3-1t-sn30, TP 8 x PP 128, and the same model on TP 8 x PP 8), one batch of the pipeline:
  wall seconds (goal <= 60 s for 1,024 chips) and the peak memory of the process that ran it.

Per run: epochs, mean window (simulated cycles per epoch) and the share of wall time not spent
advancing shards (exchange, waiting, RPC). The last line projects the grid case onto a 16-node
cluster from these measurements (docs/run.md, "Systems of chips").
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
sys.path.insert(0, ROOT)

GRID_TARGET = {"small": 1.7, "gpt2": 1.85}  # 2 Ray actors against one process, 8 grid chips
GRID_TODAY = {"gpt2": "1.64-1.67x (main at ff6d8f8, cold actors)"}
BOX_GOAL_SECONDS = 60.0  # 1,024 box chips, one batch
LAYERS = {"gpt2": {"hidden": 768, "heads": 12, "seq": 512}, "smoke": {"hidden": 256, "heads": 4, "seq": 64}}
# the shapes of the JSON lines (tests/test_benchmarks.py runs --smoke and checks them)
SMOKE_KEYS = (("case", "layer", "run", "shards", "backend", "wall_seconds", "sim_cycles", "epochs", "result_hash"),
              ("case", "layer", "summary", "speedup", "same_result_hash", "epochs", "simulated_over_dfmodel"),
              ("case", "chips", "tp", "pp", "wall_seconds", "messages", "status", "peak_rss_mib_median"),
              ("case", "nodes", "cores_per_node", "chip_epoch_seconds", "rows"))


def emit(row: dict) -> None:
    print(json.dumps(row), flush=True)


# ------------------------------------------------------------------ grid chips
def grid_config(chips: int, layer: str):
    import tomllib

    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, system_config

    with open(os.path.join(ROOT, "examples", "system_tp_ring.toml"), "rb") as f:
        raw = tomllib.load(f)
    raw["system"]["chips"] = chips
    raw["system"]["network"][0]["size"] = chips
    raw["workload"]["dataflow"]["graph"]["llm"].update(LAYERS.get(layer, {}))
    return system_config(load(RUN_SCHEMA, raw=raw))


def grid_case(chips: int, repeats: int, layer: str, cold: bool = False) -> dict:
    import contextlib

    from cluster.parallel.ray_actors import warm_shards
    from cluster.parallel.ray_env import init_ray

    cfg = grid_config(chips, layer)
    init_ray(None)  # Ray's start-up is not the simulation's time
    with contextlib.nullcontext() if cold else warm_shards():
        return _grid_runs(cfg, chips, repeats, layer, cold)


def _grid_runs(cfg, chips: int, repeats: int, layer: str, cold: bool) -> dict:
    from cluster.jobs.system import simulate_system

    simulate_system(cfg, shards=2, backend="ray")  # warm: numba's caches, and the actors unless cold
    runs: dict[str, list] = {"one": [], "ray2": []}
    for _ in range(repeats):  # alternately, so both see the same machine
        for key, shards, backend in (("one", 1, "local"), ("ray2", 2, "ray")):
            t = time.perf_counter()
            done = simulate_system(cfg, shards=shards, backend=backend)
            s, o = done.summary, done.simulation.outcome
            wall = time.perf_counter() - t
            runs[key].append((wall, s, o))
            emit({"case": f"grid{chips}", "layer": layer, "run": key, "shards": shards, "backend": backend,
                  "wall_seconds": round(wall, 3), "sim_cycles": s["sim_cycles"], "epochs": o.epochs,
                  "mean_window_cycles": round(s["sim_cycles"] / max(1, o.epochs), 1),
                  "exchange_share": round(o.sync_seconds / o.wall_seconds, 3) if o.wall_seconds else 0.0,
                  "chaining": o.figures.chaining,
                  "busy_seconds_per_shard": [round(b, 2) for b in o.figures.busy_seconds],
                  "waiting_seconds_per_shard": [round(b, 2) for b in o.figures.waiting_seconds],
                  "load_average_1min": round(os.getloadavg()[0], 2),
                  "result_hash": s["result_hash"]})
    one = statistics.median(w for w, _, _ in runs["one"])
    ray2 = statistics.median(w for w, _, _ in runs["ray2"])
    hashes = {s["result_hash"] for k in runs for _, s, _ in runs[k]}
    _, s, o = runs["ray2"][len(runs["ray2"]) // 2]
    row = {"case": f"grid{chips}", "layer": layer, "summary": True, "repeats": repeats,
           "one_process_seconds_median": round(one, 3), "ray_2_actors_seconds_median": round(ray2, 3),
           "speedup": round(one / ray2, 3), "target_speedup": GRID_TARGET.get(layer),
           "meets_target": one / ray2 >= GRID_TARGET[layer] if layer in GRID_TARGET else None,
           "speedup_today": GRID_TODAY.get(layer),
           "warm_actors": not cold,
           "same_result_hash": len(hashes) == 1, "epochs": o.epochs, "lookahead_cycles": s["lookahead"],
           "mean_window_cycles": round(s["sim_cycles"] / max(1, o.epochs), 1),
           "ray_exchange_share": round(
               statistics.median(o.sync_seconds / o.wall_seconds for _, _, o in runs["ray2"]), 3),
           "simulated_over_dfmodel": round(s["seconds_per_batch_simulated"] / s["seconds_per_batch_analytic"], 3),
           "cpus": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2)}
    emit(row)
    return row


# ------------------------------------------------------------------ box chips
def box_system(chips: int):
    """gpt3-1t-sn30's spec (1,024 chips: TP 8 x PP 128), or the same model on TP 8 x PP (chips / 8)."""
    import dataclasses

    from mapping.presets import preset

    spec = preset("gpt3-1t-sn30")
    if chips != spec.system.chips:
        tp, pp = spec.system.network
        spec = dataclasses.replace(spec, system=dataclasses.replace(
            spec.system, chips=chips, network=(tp, dataclasses.replace(pp, size=chips // tp.size))))
    return spec


def box_run(chips: int) -> dict:
    """One batch of the pipeline on ``chips`` box chips (run in a child process: its peak memory is its own)."""
    from cluster.jobs.system import simulate_system
    from mapping.solver import solve
    from sim.system.config import SystemConfig
    from sim.system.programs import PipelineParams

    spec = box_system(chips)
    t = time.perf_counter()
    plan = solve(spec)
    solve_s = time.perf_counter() - t
    cfg = SystemConfig(spec.system, spec.system.chip.frequency, 4096, "box", PipelineParams.from_plan(plan))
    t = time.perf_counter()
    done = simulate_system(cfg)
    s, o = done.summary, done.simulation.outcome
    wall = time.perf_counter() - t
    return {"chips": chips, "tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "micro_batches": plan.num_micro_batches,
            "solve_seconds": round(solve_s, 2), "wall_seconds": round(wall, 2), "messages": s["messages_total"],
            "messages_per_second": round(s["messages_total"] / wall), "epochs": o.epochs,
            "seconds_per_batch_simulated": s["seconds_simulated"], "seconds_per_batch_dfmodel": plan.seconds_per_batch,
            "result_hash": s["result_hash"], "status": s["status"]}


def box_case(chips: int, repeats: int) -> dict:
    walls, peaks, last = [], [], {}
    for _ in range(repeats):
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child-box", str(chips)],
                                stdout=subprocess.PIPE, text=True)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        if status != 0:
            raise SystemExit(f"box{chips}: the child process failed (status {status})")
        last = json.loads(out.strip().splitlines()[-1])
        walls.append(last["wall_seconds"])
        peaks.append(usage.ru_maxrss / 1024)  # KiB on Linux
    row = {"case": f"box{chips}", **last, "repeats": repeats, "wall_seconds_median": statistics.median(walls),
           "peak_rss_mib_median": round(statistics.median(peaks), 1)}
    if chips == 1024:
        row.update(goal_wall_seconds=BOX_GOAL_SECONDS, meets_goal=row["wall_seconds_median"] <= BOX_GOAL_SECONDS)
    emit(row)
    return row


# ------------------------------------------------------------------ 16 nodes, on paper
def projection(grid: dict, nodes: int = 16, cores: int = 2) -> dict:
    """A grid system of many chips on ``nodes`` x ``cores`` actors, from the 8-chip run's per-epoch
    costs: each epoch an actor advances its chips (measured chip-epoch cost, chips spread evenly)
    and then exchanges (the measured exchange time per epoch, held constant: the exchange is a
    barrier plus each actor's own boundary, which does not grow with the actor count)."""
    epochs = grid["epochs"]
    measured = int(grid["case"][len("grid"):])  # chips of the measured run
    chip_epoch = grid["one_process_seconds_median"] / (epochs * measured)  # one chip through one epoch
    exchange = grid["ray_2_actors_seconds_median"] * grid["ray_exchange_share"] / epochs
    rows = []
    for chips in (8, 64, 256, 1024):
        actors = min(chips, nodes * cores)
        one = chips * chip_epoch * epochs
        spread = (-(-chips // actors) * chip_epoch + exchange) * epochs
        rows.append({"chips": chips, "actors": actors, "one_process_seconds": round(one, 1),
                     "cluster_seconds": round(spread, 1), "speedup": round(one / spread, 1)})
    return {"case": "projection", "nodes": nodes, "cores_per_node": cores, "chip_epoch_seconds": chip_epoch,
            "exchange_seconds_per_epoch": exchange, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", default="grid8,box64,box1024")
    ap.add_argument("--layer", choices=("small", "gpt2", "smoke"), default="small",
                    help="grid case's layer: hidden 512 x 256 tokens, GPT-2 small's 768 x 512, or 256 x 64")
    ap.add_argument("--cold", action="store_true", help="new Ray actors for every run (not kept warm)")
    ap.add_argument("--child-box", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="grid2 on a 256 x 64 layer and box16, once")
    args = ap.parse_args()
    if args.smoke:
        args.cases, args.layer, args.repeats = "grid2,box16", "smoke", 1
    if args.child_box:
        print(json.dumps(box_run(args.child_box)))
        return
    cases = args.cases.split(",")
    grid = None
    for case in cases:
        if case.startswith("grid"):
            grid = grid_case(int(case[4:]), args.repeats, args.layer, args.cold)
        elif case.startswith("box"):
            box_case(int(case[3:]), args.repeats)
        else:
            raise SystemExit(f"unknown case {case!r}: grid8, box64, box1024")
    if grid is not None:
        emit(projection(grid))


if __name__ == "__main__":
    main()
