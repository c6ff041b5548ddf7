"""The public Azure 2023 code hour, whole, served by Llama-3.1-8B on one sn40l socket: cold, then
again with its anchors stored. One JSON line a run, each figure beside its target.

    python benchmarks/full_length.py            # the hour (8,819 requests): about 25 min cold on 2 busy cores
    python benchmarks/full_length.py --smoke    # its first 2 s on an 8 x 16 sn40l, one anchor: seconds

examples/serve_llama8b_sn40l.toml with the trace tests/data/traces/azure2023-hour (the whole
file, recorded times, prompts uncapped) and a fresh step cache directory (a temporary one): the
cold run simulates every anchor and stores it (sim/workloads/serve/cache.py), the warm run takes
them all from the store. Targets (issue's): the cold hour in at most 30 minutes on this 2-core
machine, at least 4 simulated seconds per wall second once the anchors are stored, peak memory
at most 2 GiB. ``peak_rss_bytes`` is this process's high-water mark so far (Linux ``ru_maxrss``)
and its anchor workers' (the largest child's): the warm run's includes the cold one's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

EXAMPLE = os.path.join(HERE, "..", "examples", "serve_llama8b_sn40l.toml")
HOUR = os.path.join(HERE, "..", "tests", "data", "traces", "azure2023-hour", "AzureLLMInferenceTrace_code.csv")
TARGET_COLD_SECONDS = 1800.0
TARGET_WARM_SIM_PER_WALL = 4.0
TARGET_PEAK_BYTES = 2 << 30
SMOKE_KEYS = (("bench", "run", "wall_seconds", "target_cold_seconds", "cpu_seconds", "sim_seconds",
               "sim_seconds_per_wall_second", "target_sim_seconds_per_wall_second", "peak_rss_bytes",
               "target_peak_bytes", "meets_target", "status", "trace_requests", "requests_finished", "anchors",
               "anchors_cached", "generated_tokens", "ttft_p99_seconds", "tbt_p99_seconds", "e2e_p99_seconds",
               "result_hash"),)


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _peak() -> int:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return max(me.ru_maxrss, kids.ru_maxrss) * 1024


def run_once(name: str, overrides: dict) -> dict:
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, chip_config
    from cluster.jobs.chip import simulate_chip

    cfg = load(RUN_SCHEMA, EXAMPLE, extra=list(overrides.items()))
    t0, c0 = time.perf_counter(), _cpu()
    s = simulate_chip(chip_config(cfg)).summary
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    rate = s["sim_seconds"] / wall
    peak = _peak()
    meets = peak <= TARGET_PEAK_BYTES and (wall <= TARGET_COLD_SECONDS if name == "cold"
                                           else rate >= TARGET_WARM_SIM_PER_WALL)
    return {"bench": "full_length", "run": name, "wall_seconds": round(wall, 2),
            "target_cold_seconds": TARGET_COLD_SECONDS, "cpu_seconds": round(cpu, 2),
            "sim_seconds": s["sim_seconds"], "sim_seconds_per_wall_second": round(rate, 3),
            "target_sim_seconds_per_wall_second": TARGET_WARM_SIM_PER_WALL, "peak_rss_bytes": peak,
            "target_peak_bytes": TARGET_PEAK_BYTES, "meets_target": meets, "status": s["status"],
            "trace_requests": s.get("trace_requests"), "requests_finished": s.get("requests_finished"),
            "anchors": s.get("anchors"), "anchors_cached": s.get("anchors_cached"), "generated_tokens": s.get("tokens"),
            "ttft_p99_seconds": s.get("ttft_p99_seconds"), "tbt_p99_seconds": s.get("tbt_p99_seconds"),
            "e2e_p99_seconds": s.get("e2e_p99_seconds"), "result_hash": s.get("result_hash")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="the hour's first 2 s on an 8 x 16 sn40l: seconds")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as store:
        base = {"workload.decode.trace": os.path.abspath(HOUR), "workload.decode.trace_duration": 0,
                "run.max_cycles": 8 * 10**12, "workload.decode.step_cache": os.path.join(store, "anchors")}
        if args.smoke:
            base.update({"chip.rows": 8, "chip.cols": 16, "workload.decode.requests": 2,
                         "workload.decode.trace_duration": "2s", "workload.decode.step_anchor_ratio": 1e9,
                         "workload.decode.step_context_ratio": 1e9})
        for name in ("cold", "warm"):
            print(json.dumps(run_once(name, base)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
