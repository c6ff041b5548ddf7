"""Capacity of a decode config: the highest arrival rate whose p99 TTFT and p99 TBT meet the
objectives, found by bisection (Vidur's capacity search, sim/workloads/serving.capacity).

    python benchmarks/serving_capacity.py examples/kv_decode_trace.toml --slo-ttft 200us --slo-tbt 20us
    python benchmarks/serving_capacity.py CONFIG --slo-ttft 1ms --slo-tbt 50us --lo 0.5 --hi 64 \\
        --set memory.on_oom=preempt --set memory.preempt_mode=swap

The rate is a speed-up of the config's arrivals: with a trace, ``workload.decode.trace_speedup``
times it; otherwise ``workload.decode.arrival_interval`` divided by it (which must then be
above 0). A rate meets the objectives when every request is served and the run's p99 TTFT and
p99 TBT are within them (``serving.meets_p99``). Prints one JSON line per run tried and a last
line with the capacity (``bounded`` false: the highest rate tried still met them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from cluster.config import load  # noqa: E402
from cluster.config.run import RUN_SCHEMA, chip_config  # noqa: E402
from cluster.config.units import parse_duration  # noqa: E402
from cluster.jobs.chip import simulate_chip  # noqa: E402
from sim.workloads.serving import Objectives, capacity, meets_p99  # noqa: E402


def rate_overrides(cfg: dict, speedup: float) -> list[str]:
    """The --set lines that run ``cfg`` with its arrivals ``speedup`` times as frequent."""
    d = cfg["workload"]["decode"]
    if d["trace"]:
        return [f"workload.decode.trace_speedup={d['trace_speedup'] * speedup!r}"]
    if d["arrival_interval"] <= 0:
        raise SystemExit("the config's requests all arrive at once (arrival_interval = 0): no rate to scale")
    return [f"workload.decode.arrival_interval={max(1, round(d['arrival_interval'] / speedup))}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config")
    ap.add_argument("--slo-ttft", required=True, help="objective on p99 TTFT, with its unit (e.g. 200us)")
    ap.add_argument("--slo-tbt", required=True, help="objective on p99 TBT, with its unit (e.g. 20us)")
    ap.add_argument("--lo", type=float, default=0.25, help="lowest speed-up tried")
    ap.add_argument("--hi", type=float, default=64.0, help="highest speed-up tried")
    ap.add_argument("--tol", type=float, default=0.05, help="stop when hi / lo - 1 is at most this")
    ap.add_argument("--max-runs", type=int, default=12)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    slo = Objectives(parse_duration(args.slo_ttft), parse_duration(args.slo_tbt))
    base = load(RUN_SCHEMA, args.config, args.overrides)

    def meets(speedup: float) -> bool:
        cfg = load(RUN_SCHEMA, args.config, args.overrides + rate_overrides(base, speedup))
        s = simulate_chip(chip_config(cfg)).summary
        ok = meets_p99(s, slo)
        print(json.dumps({"speedup": speedup, "meets": ok, "status": s["status"],
                          "requests_finished": s.get("requests_finished"), "preemptions": s.get("preemptions"),
                          "ttft_p99_seconds": s.get("ttft_p99_seconds"), "tbt_p99_seconds": s.get("tbt_p99_seconds"),
                          "trace_arrival_rate": s.get("trace_arrival_rate")}), flush=True)
        return ok

    found = capacity(meets, args.lo, args.hi, args.tol, args.max_runs)
    print(json.dumps({"capacity_speedup": found.rate, "bounded": found.bounded, "runs": len(found.tried),
                      "slo_ttft_seconds": slo.ttft, "slo_tbt_seconds": slo.tbt}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
