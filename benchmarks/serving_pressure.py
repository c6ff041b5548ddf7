"""Memory pressure: what each policy serves of an over-committed trace.

    python benchmarks/serving_pressure.py                  # all 64 requests, capacity for three cases
    python benchmarks/serving_pressure.py --requests 32    # the first 32 (half the time)
    python benchmarks/serving_pressure.py --capacity none  # the table only
    python benchmarks/serving_pressure.py --smoke          # 3 requests, no capacity: a smoke test

examples/kv_decode_pressure.toml (examples/traces/azure_code_pressure.csv: the public Azure
code trace's first-minute arrival rate, prompts of thousands of tokens, capped at 1,024; 16
sequences at once on plasticine) under ``virtual`` with ``spill`` none / nearest x ``on_oom``
stall, evict, preempt (recompute), preempt (swap), and the baselines ``static-single``,
``static-multi`` (buffers of the largest KV a request can have: the prompt and output caps)
and ``realloc-copy`` (spill none, on_oom stall). One JSON line per case (status, requests
finished, peak and first-OOM utilisation, preemptions, p99 TTFT and TBT, generated tokens/s,
energy per generated token), then, for the ``--capacity`` cases, the capacity: the highest
speed-up of the trace's arrivals at which its replicas serve every request within the objectives
on the pooled p99 TTFT and p99 TBT, every lower speed-up tried too (sim/serving/capacity.py: a
scan of 2 ** (k / --steps) between ``--lo`` and ``--hi``, then ``--refine`` bisections; replicas
as benchmarks/serving_capacity.py's), and last the targets with the measured figures beside
them. Runs are in-process, one shard; the table's runs stop at the config's run.max_cycles
(20 M cycles: status ``cut_off``), the capacity runs at 10^9.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from cluster.config import load  # noqa: E402
from cluster.config.run import RUN_SCHEMA, chip_config  # noqa: E402
from cluster.config.units import parse_duration  # noqa: E402
from cluster.jobs.capacity import attainment, plan_replicas, run_scale  # noqa: E402
from cluster.jobs.chip import simulate_chip  # noqa: E402
from sim.serving.capacity import capacity  # noqa: E402
from sim.serving.metrics import Objectives  # noqa: E402

CONFIG = os.path.join(HERE, "..", "examples", "kv_decode_pressure.toml")
ON_OOM = {"stall": {"on_oom": "stall"}, "evict": {"on_oom": "evict"},
          "preempt-recompute": {"on_oom": "preempt", "preempt_mode": "recompute"},
          "preempt-swap": {"on_oom": "preempt", "preempt_mode": "swap"}}
# the shapes of the JSON lines (tests/test_benchmarks.py runs --smoke and checks them)
SMOKE_KEYS = (("bench", "case", "status", "requests_finished", "peak_mu_utilization", "ttft_p99_seconds"),
              ("bench", "target", "met", "measured"))
CAPACITY_CASES = ("virtual/stall", "virtual/preempt-recompute", "virtual+nearest/stall")
FIGURES = ("status", "trace_requests", "requests_finished", "requests_failed", "peak_mu_utilization",
           "first_oom_utilization", "oom_events", "preemptions", "spilled_blocks", "ttft_p99_seconds",
           "tbt_p99_seconds", "tokens_per_second", "energy_per_token_joules", "trace_arrival_rate")


@dataclass(frozen=True)
class Case:
    """One memory configuration: a name and its ``memory.*`` keys."""

    name: str
    memory: dict

    def overrides(self) -> list[str]:
        return [f"memory.{k}={v!r}" if isinstance(v, str) else f"memory.{k}={v}" for k, v in self.memory.items()]


def cases(static_bytes: int) -> list[Case]:
    """The virtual policy's spill x on_oom grid, then the baselines (spill none, stall)."""
    out = [Case(f"virtual{'+nearest' if spill == 'nearest' else ''}/{oom}",
                {"policy": "virtual", "spill": spill, **keys})
           for spill in ("none", "nearest") for oom, keys in ON_OOM.items()]
    out += [Case("static-single/stall", {"policy": "static-single", "on_oom": "stall"}),
            Case("static-multi/stall", {"policy": "static-multi", "static_buffer_bytes": static_bytes,
                                        "on_oom": "stall"}),
            Case("realloc-copy/stall", {"policy": "realloc-copy", "on_oom": "stall"})]
    return out


def largest_kv_buffer(cfg: dict) -> int:
    """Bytes of one K or V buffer at the caps: a static reservation that never runs out."""
    d = cfg["workload"]["decode"]
    return (d["max_prompt_tokens"] + d["max_output_tokens"]) * d["head_dim"] * d["dtype_bytes"]


def run(config: str, overrides: list[str]) -> dict:
    return simulate_chip(chip_config(load(RUN_SCHEMA, config, overrides))).summary


def emit(record: dict) -> None:
    """One JSON line; NaN (no tokens to divide by) is null."""
    print(json.dumps({k: None if isinstance(v, float) and v != v else v for k, v in record.items()}), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=CONFIG)
    ap.add_argument("--requests", type=int, default=0, help="first N requests of the window (0: all)")
    ap.add_argument("--slo-ttft", default="500us", help="objective on p99 TTFT, with its unit")
    ap.add_argument("--slo-tbt", default="50us", help="objective on p99 TBT, with its unit")
    ap.add_argument("--capacity", default=",".join(CAPACITY_CASES),
                    help="comma-separated cases whose capacity to search ('none': no search, 'all': every case)")
    ap.add_argument("--lo", type=float, default=0.25, help="lowest speed-up of the arrivals tried")
    ap.add_argument("--hi", type=float, default=4.0, help="highest speed-up tried")
    ap.add_argument("--steps", type=int, default=4, help="capacity scan: lattice scales per doubling")
    ap.add_argument("--refine", type=int, default=2, help="capacity: bisections of the lattice step above the answer")
    ap.add_argument("--smoke", action="store_true", help="the first 3 requests, no capacity search (a smoke test)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.requests, args.capacity = args.requests or 3, "none"
    slo = Objectives(parse_duration(args.slo_ttft), parse_duration(args.slo_tbt))
    base_sets = [f"workload.decode.requests={args.requests}"]
    base = load(RUN_SCHEMA, args.config, base_sets)
    every = cases(largest_kv_buffer(base))
    wanted = {"none": (), "all": tuple(c.name for c in every)}.get(args.capacity, tuple(args.capacity.split(",")))
    unknown = sorted(set(wanted) - {c.name for c in every})
    if unknown:
        raise SystemExit(f"--capacity: unknown case(s) {unknown}; the cases are {[c.name for c in every]}")

    rows: dict[str, dict] = {}
    for case in every:
        t = time.process_time()
        s = run(args.config, base_sets + case.overrides())
        rows[case.name] = row = {"case": case.name, **{k: s.get(k) for k in FIGURES},
                                 "cpu_seconds": round(time.process_time() - t, 2)}
        emit({"bench": "serving_pressure", **row})

    caps = {}
    for name in wanted:
        case = next(c for c in every if c.name == name)
        sets = base_sets + case.overrides()
        replicas = plan_replicas(args.config, sets)

        def measure(speedup: float, sets=sets, replicas=replicas):
            return attainment(speedup, run_scale(args.config, sets, replicas, speedup), slo)

        found = capacity(measure, args.lo, args.hi, args.steps, args.refine)
        caps[name] = found.capacity
        emit({"bench": "serving_pressure", "case": name, "capacity_speedup": found.capacity, "bounded": found.bounded,
              "resolution": found.resolution, "recovered": found.recovered, "replicas": replicas.count,
              "capacity_requests_per_second": found.capacity * rows[name]["trace_arrival_rate"],
              "tried": [{"stage": stage, "speedup": a.scale, "meets": a.met} for stage, a in found.curve],
              "slo_ttft_seconds": slo.ttft, "slo_tbt_seconds": slo.tbt})

    preempting = [r for n, r in rows.items() if "preempt" in n]
    nearest = {n: r["first_oom_utilization"] for n, r in rows.items() if "+nearest" in n}
    emit({"bench": "serving_pressure", "target": "no configuration with preempt deadlocks",
          "met": all(r["status"] != "deadlocked" for r in preempting),
          "measured": {r["case"]: r["status"] for r in preempting}})
    emit({"bench": "serving_pressure",
          "target": "with spill = nearest the first OOM comes at >= 90 % chip-wide utilisation",
          "met": all(u is None or u >= 0.9 for u in nearest.values()),  # None: memory never ran out
          "measured": nearest,
          "without_spill": rows["virtual/stall"]["first_oom_utilization"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
