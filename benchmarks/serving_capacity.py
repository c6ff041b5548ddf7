"""Capacity of a decode config: the highest arrival-rate scale at which the p99 TTFT and p99 TBT
meet the objectives and every lower scale tried meets them too (sim/serving/capacity.py).

    python benchmarks/serving_capacity.py examples/kv_decode_pressure.toml --slo-ttft 500us --slo-tbt 50us \\
        --set memory.on_oom=preempt
    python benchmarks/serving_capacity.py CONFIG --slo-ttft 1ms --slo-tbt 50us --lo 0.5 --hi 64 --steps 8
    python benchmarks/serving_capacity.py --smoke     # a small search on a short trace, in seconds

A scale multiplies the config's arrival rate (``trace_speedup`` times it with a trace, else
``arrival_interval`` divided by it). The scan tries the lattice 2 ** (k / steps) between --lo and
--hi upward to the first scale that misses (and --past more, to show whether attainment comes
back), then --refine bisections of that lattice step: the answer is within a factor
2 ** (1 / (steps * 2 ** refine)) of the boundary (1.044 by default) and does not depend on --lo
and --hi as long as they bracket it. Each scale runs the config's replicas (cluster/jobs/capacity.py:
by default enough jittered copies of a trace that the pooled requests reach 101, the fewest
whose p99 is more than the maximum) and is met when every replica serves every request and the
pooled p99s are within the objectives.

Prints one JSON line per scale tried (the attainment curve: stage, scale, met, pooled p99s,
share of requests within both objectives) and a last line with the capacity (``bounded`` false:
every scale up to --hi met; ``below_lo``: the lowest missed; ``recovered``: scales above the
answer that met again, i.e. attainment is not monotone there).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from cluster.config.units import parse_duration  # noqa: E402
from cluster.errors import UserError  # noqa: E402
from cluster.jobs.capacity import attainment, plan_replicas, rate_overrides, run_scale  # noqa: E402,F401
from sim.serving.capacity import capacity  # noqa: E402
from sim.serving.metrics import Objectives  # noqa: E402

CONFIG = os.path.join(ROOT, "examples", "kv_decode_pressure.toml")
# the shapes of the JSON lines (tests/test_benchmarks.py runs --smoke and checks them)
SMOKE_KEYS = (("bench", "try", "scale", "met", "ttft_p99_seconds", "tbt_p99_seconds", "slo_attainment"),
              ("bench", "capacity_speedup", "bounded", "below_lo", "resolution", "recovered", "replicas"))
# --smoke: the pressure trace's first 6 requests, two replicas, one scale: two runs of under a second
# (tests/sim/serving/test_capacity.py tests the search itself)
SMOKE = {"sets": ["workload.decode.requests=6", "memory.on_oom='preempt'"], "lo": 1.0, "hi": 1.0, "steps": 1,
         "refine": 1, "past": 1, "min_requests": 12}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("config", nargs="?", default=CONFIG,
                    help="a decode config (default: examples/kv_decode_pressure.toml)")
    ap.add_argument("--slo-ttft", default="500us", help="objective on p99 TTFT, with its unit")
    ap.add_argument("--slo-tbt", default="50us", help="objective on p99 TBT, with its unit")
    ap.add_argument("--lo", type=float, default=0.25, help="lowest scale of the scan")
    ap.add_argument("--hi", type=float, default=4.0, help="highest scale of the scan")
    ap.add_argument("--steps", type=int, default=4, help="lattice scales per doubling (the scan's resolution)")
    ap.add_argument("--refine", type=int, default=2, help="bisections of the lattice step above the last scale met")
    ap.add_argument("--past", type=int, default=2, help="lattice scales scanned beyond the first miss (shown only)")
    ap.add_argument("--replicas", type=int, default=0, help="copies run per scale (0: enough for --min-requests)")
    ap.add_argument("--replica-by", default="auto", choices=("auto", "jitter", "windows", "seeds"),
                    help="auto: jitter for a trace, seeds for drawn arrivals")
    ap.add_argument("--jitter", default="",
                    help="replicas by jitter: the jitter, with its unit (default: one mean gap)")
    ap.add_argument("--min-requests", type=int, default=None,
                    help="pooled requests a scale needs (default 101: what a p99 needs to be more than the maximum)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--smoke", action="store_true", help="a small search (smoke test): " + json.dumps(SMOKE))
    args = ap.parse_args(argv)
    if args.smoke:
        args.overrides = SMOKE["sets"] + args.overrides
        for k in ("lo", "hi", "steps", "refine", "past", "min_requests"):
            setattr(args, k, SMOKE[k])
    try:
        slo = Objectives(parse_duration(args.slo_ttft), parse_duration(args.slo_tbt))
        replicas = plan_replicas(args.config, args.overrides, args.replica_by, args.replicas, args.min_requests,
                                 parse_duration(args.jitter) if args.jitter else 0.0)

        def measure(scale: float):
            t = time.process_time()
            a = attainment(scale, run_scale(args.config, args.overrides, replicas, scale), slo)
            a.figures["cpu_seconds"] = round(time.process_time() - t, 2)
            return a

        found = capacity(_printing(measure), args.lo, args.hi, args.steps, args.refine, args.past)
    except (UserError, ValueError) as exc:
        print(f"serving_capacity: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({
        "bench": "serving_capacity", "capacity_speedup": found.capacity, "bounded": found.bounded,
        "below_lo": found.below_lo, "resolution": found.resolution, "recovered": found.recovered,
        "lattice": f"2^(k/{args.steps})", "refine": args.refine, "lo": args.lo, "hi": args.hi,
        "scales_tried": len(found.curve), "runs": len(found.curve) * replicas.count,
        "replicas": replicas.count, "replica_by": replicas.kind, "jitter_seconds": replicas.jitter_seconds,
        "requests_per_replica": replicas.requests, "pooled_requests": replicas.pooled,
        "slo_ttft_seconds": slo.ttft, "slo_tbt_seconds": slo.tbt}), flush=True)
    return 0


def _printing(measure):
    """``measure`` printing each scale's line as it is decided (the curve, in the order tried)."""
    stage = {"n": 0}

    def wrapped(scale: float):
        a = measure(scale)
        stage["n"] += 1
        print(json.dumps({"bench": "serving_capacity", "try": stage["n"], "scale": scale, "met": a.met,
                          **a.figures}), flush=True)
        return a

    return wrapped


if __name__ == "__main__":
    sys.exit(main())
