"""A real model served at the trace's recorded times, under every memory policy and on_oom: how long it
takes and what it serves. One JSON line per case.

    python benchmarks/serve_real_time.py                       # examples/serve_llama8b_sn40l.toml, every case
    python benchmarks/serve_real_time.py --trace AzureLLMInferenceTrace_code.csv   # the public file itself
    python benchmarks/serve_real_time.py --only virtual        # the cases whose name starts so
    python benchmarks/serve_real_time.py --smoke               # two requests on a small chip, seconds

examples/serve_llama8b_sn40l.toml: Llama-3.1-8B on one sn40l socket, 60 s of the Azure-code-shaped
trace (or ``--trace``: any file in a published format, its first 60 s) at speed-up 1, prompts
uncapped. Each case prints its wall time (target: at most 300 s on this 2-core machine) and the
CPU time of its process and anchor workers (the wall time it would take on one idle core), the
simulated cycles and seconds, simulated cycles per wall and per CPU second, the anchors it simulated (or took
from the step cache) and their wall time, requests served and failed, preemptions, TTFT, TBT and
e2e percentiles, goodput, and the load average. Anchors are simulated ahead, side by side, in
``--workers`` processes (``workload.decode.step_workers``; 0, the default: one per core;
sim/workloads/serve/prefetch.py); ``anchor_wall_seconds`` sums their overlapping wall times.
``--cache DIR`` keeps simulated anchors for later runs (sim/workloads/serve/cache.py): its key
holds the memory policy but not ``on_oom`` (unless an anchor's own run ran out of memory), so
the on_oom cases of one policy share its anchors; a policy's first case is a cold one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

EXAMPLE = os.path.join(HERE, "..", "examples", "serve_llama8b_sn40l.toml")
TARGET_SECONDS = 300.0
POLICIES = {"virtual": {"policy": "virtual"}, "static-multi": {"policy": "static-multi", "buffers_per_mu": 4},
            "static-single": {"policy": "static-single"},
            "realloc-copy": {"policy": "realloc-copy", "initial_bytes": "4KiB", "growth": 2.0}}
ON_OOM = {"stall": {"on_oom": "stall"}, "evict": {"on_oom": "evict"}, "fail": {"on_oom": "fail"},
          "preempt-recompute": {"on_oom": "preempt", "preempt_mode": "recompute"},
          "preempt-swap": {"on_oom": "preempt", "preempt_mode": "swap"}}
FIGURES = ("status", "status_detail", "trace_requests", "requests_finished", "requests_failed", "preemptions",
           "sim_cycles", "sim_seconds", "serve_steps", "anchors", "anchors_cached", "anchors_unused",
           "anchor_wall_seconds", "anchor_efficiency_min", "anchor_efficiency_max", "ttft_p50_seconds",
           "ttft_p99_seconds", "tbt_p50_seconds", "tbt_p99_seconds", "e2e_p50_seconds", "e2e_p99_seconds",
           "goodput_requests_per_second", "tokens_per_second", "hbm_peak_bytes", "trace_arrival_rate", "step_error")
# the timing and FIGURES, written out: tests/test_benchmarks.py reads the literal
SMOKE_KEYS = (("bench", "case", "step_workers", "wall_seconds", "cpu_seconds", "target_seconds", "meets_target",
               "meets_target_cpu", "cycles_per_wall_second", "cycles_per_cpu_second", "load_average", "status",
               "status_detail", "trace_requests", "requests_finished", "requests_failed", "preemptions", "sim_cycles",
               "sim_seconds", "serve_steps", "anchors", "anchors_cached", "anchors_unused", "anchor_wall_seconds",
               "anchor_efficiency_min", "anchor_efficiency_max", "ttft_p50_seconds", "ttft_p99_seconds",
               "tbt_p50_seconds", "tbt_p99_seconds", "e2e_p50_seconds", "e2e_p99_seconds",
               "goodput_requests_per_second", "tokens_per_second", "hbm_peak_bytes", "trace_arrival_rate",
               "step_error"),)


def _cpu() -> float:
    """CPU seconds of this process and of its children that have ended (the anchor workers: a run
    stops its workers before it returns)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run_case(memory: dict, overrides: dict) -> dict:
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, chip_config
    from cluster.jobs.chip import simulate_chip

    cfg = load(RUN_SCHEMA, EXAMPLE, extra=[*overrides.items(), *((f"memory.{k}", v) for k, v in memory.items())])
    t0, c0 = time.perf_counter(), _cpu()
    s = simulate_chip(chip_config(cfg)).summary
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    row = {k: s.get(k) for k in FIGURES}
    # cpu_seconds: what the run's process and its anchor workers spent, its wall time on one idle core
    # (the wall time is about that over the cores it had: the workers', side by side)
    row.update(wall_seconds=round(wall, 2), cpu_seconds=round(cpu, 2), target_seconds=TARGET_SECONDS,
               meets_target=wall <= TARGET_SECONDS, meets_target_cpu=cpu <= TARGET_SECONDS,
               cycles_per_wall_second=round(s["sim_cycles"] / wall), cycles_per_cpu_second=round(s["sim_cycles"] / cpu),
               load_average=os.getloadavg()[0])
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default="", help="a trace file in a published format (default: the example's)")
    ap.add_argument("--only", default="", help="cases whose name starts with this")
    ap.add_argument("--cache", default="", help="a step cache directory shared by the cases (default: none)")
    ap.add_argument("--workers", type=int, default=0,
                    help="workload.decode.step_workers: processes simulating anchors ahead (0: the cores; 1: none)")
    ap.add_argument("--smoke", action="store_true", help="two requests on an 8 x 16 sn40l, one anchor: seconds")
    args = ap.parse_args(argv)
    base: dict = {}
    if args.trace:
        base["workload.decode.trace"] = os.path.abspath(args.trace)
    if args.cache:
        base["workload.decode.step_cache"] = os.path.abspath(args.cache)
    cases = [(f"{p}/{o}", {**POLICIES[p], **ON_OOM[o]}) for p in POLICIES for o in ON_OOM]
    if args.smoke:
        base.update({"chip.rows": 8, "chip.cols": 16, "workload.decode.requests": 2,
                     "workload.decode.trace_duration": "2s", "workload.decode.step_anchor_ratio": 1e9,
                     "workload.decode.step_context_ratio": 1e9})
        cases = [("virtual/stall", {**POLICIES["virtual"], **ON_OOM["stall"]})]
    for name, memory in cases:
        if not name.startswith(args.only):
            continue
        row = {"bench": "serve_real_time", "case": name, "step_workers": args.workers,
               **run_case(memory, {**base, "workload.decode.step_workers": args.workers})}
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
