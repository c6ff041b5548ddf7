"""A run's memory against the tokens it generates: peak RSS of `rdasim run`
serving the public Azure 2023 conversation trace's first 500, 1,000 and 2,000 requests.

    python benchmarks/run_memory.py                       # 500, 1,000, 2,000 requests, one run each
    python benchmarks/run_memory.py --repeat 3            # the median of 3 runs of each
    python benchmarks/run_memory.py --requests 20,40,80   # a quick look
    python benchmarks/run_memory.py --smoke               # 5 and 10 requests: what the test suite runs

The trace: the public Azure 2023 conversation hour as published
(tests/data/traces/azure2023-hour/AzureLLMInferenceTrace_conv.csv: 19,366 requests; Patel et al.,
Splitwise, ISCA 2024; CC-BY 4.0), its first N requests at their recorded gaps.
Each run is examples/kv_decode_pressure.toml's chip (plasticine, 16 sequences at once,
virtual policy) with preemption (``memory.on_oom = "preempt"``), 1 layer of 2 heads, prompts
capped at 1,024 tokens and outputs at 128 (the published median is 129: a request's own rows
are then shared by about 97 tokens), arrivals 10,000 times faster: the first N requests
of the trace, in a process of its own (its peak RSS from ``getrusage``), through ``rdasim.run``
(the run's tables built, not written), after one short run, not measured, that leaves the NoC
kernels compiled in numba's disk cache (a run that compiles them peaked 18 MB higher at 500
requests: 287 against 269 MB). ``run.sample_cycles`` is 10^9, one sample of each MU in
run_mu_series: that table holds at most 2,000 samples an MU whatever the run's length (128,000
rows on plasticine), a bounded cost that would otherwise swing between 1,000 and 2,000 samples
from run to run and blur the slope.

One JSON line per run (requests, generated tokens, peak RSS, bytes per generated token beyond
the first run's), one per pair of runs (bytes per generated token between them), then the
target: peak RSS grows by at most 100 bytes per generated token beyond the first run's, so
the full hour of either 2023 trace fits in 2 GiB. An hour is projected from the first run by
the steepest growth measured, per token or per request, whichever projects more: each shipped
2023 hour's requests and generated tokens, outputs uncapped (the conversation trace's 19,366
requests, the code trace's 8,819).

Arrow's buffers come from the system allocator (cluster/jobs/job.py system_arrow_pool);
``--pool mimalloc`` runs with pyarrow's default pool instead, to measure what the choice is worth.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, ROOT)

CONFIG = os.path.join(ROOT, "examples", "kv_decode_pressure.toml")
HOURS = os.path.join(ROOT, "tests", "data", "traces", "azure2023-hour")
TRACES = {"conversation": os.path.join(HOURS, "AzureLLMInferenceTrace_conv.csv"),
          "code": os.path.join(HOURS, "AzureLLMInferenceTrace_code.csv")}
TARGET_BYTES_PER_TOKEN = 100
TARGET_HOUR_BYTES = 2 * 2**30
SETS = ["memory.on_oom=preempt", "workload.decode.layers=1", "workload.decode.max_prompt_tokens=1024",
        "workload.decode.max_output_tokens=128", "workload.decode.trace_duration=0", "run.max_cycles=10000000000",
        "run.sample_cycles=1000000000"]


def hour_totals(path: str) -> tuple[int, int]:
    """A published 2023 trace's requests and generated tokens (its GeneratedTokens column, uncapped)."""
    with open(path, newline="") as f:
        outputs = [int(row["GeneratedTokens"]) for row in csv.DictReader(f)]
    return len(outputs), sum(outputs)


def _value(text):
    """An override's value as TOML would read it (a number, or the string itself)."""
    for kind in (int, float):
        try:
            return kind(text)
        except (TypeError, ValueError):
            pass
    return text


def one_run(trace: str, requests: int) -> dict:
    """In this process: `rdasim run`'s simulation and tables for the first ``requests`` requests."""
    import rdasim

    t = time.process_time()
    sets = dict(x.split("=", 1) for x in SETS)
    sets.update({"workload.decode.trace": trace, "workload.decode.requests": requests})
    s = rdasim.run(CONFIG, {k: _value(v) for k, v in sets.items()}, progress=False).summary
    return {"requests": requests, "status": s["status"], "generated_tokens": s["tokens"],
            "preemptions": s["preemptions"], "cpu_seconds": round(time.process_time() - t, 1),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def measure(trace: str, requests: int, repeat: int, pool: str = "") -> dict:
    """The median peak RSS of ``repeat`` runs, each in a fresh process (``pool``: Arrow's, by name)."""
    runs = []
    env = {**os.environ, "PYTHONPATH": ROOT, **({"ARROW_DEFAULT_MEMORY_POOL": pool} if pool else {})}
    for _ in range(repeat):
        out = subprocess.run([sys.executable, __file__, "--one", trace, str(requests)], check=True,
                             capture_output=True, text=True, env=env)
        runs.append(json.loads(out.stdout.splitlines()[-1]))
    row = dict(runs[0])
    row["peak_rss_bytes"] = int(statistics.median(r["peak_rss_bytes"] for r in runs))
    row["runs"] = repeat
    return row


# the shapes of the JSON lines (tests/test_benchmarks.py runs --smoke and checks them)
SMOKE_KEYS = (("bench", "requests", "generated_tokens", "peak_rss_bytes", "bytes_per_token_beyond_first", "pool",
               "target_bytes_per_token"),
              ("bench", "between", "extra_generated_tokens", "bytes_per_token", "target_bytes_per_token", "met"),
              ("bench", "target", "measured", "worst_between_any_two", "met"),
              ("bench", "target", "trace", "hour_requests", "hour_generated_tokens", "bytes_per_request",
               "projected_peak_rss_bytes", "met"))


def slope(a: dict, b: dict) -> float | None:
    """Bytes of peak RSS per generated token from run ``a`` to run ``b`` (None: no more tokens)."""
    extra = b["generated_tokens"] - a["generated_tokens"]
    return round((b["peak_rss_bytes"] - a["peak_rss_bytes"]) / extra, 1) if extra > 0 else None


def hour(rows: list[dict], name: str, requests: int, tokens: int) -> dict:
    """The peak RSS a trace's hour would need, extrapolated from the first run by the steepest
    growth measured, per generated token or per request, whichever projects more (the code
    trace has a tenth of the tokens a request the runs have, so its requests may cost more than
    its tokens)."""
    base = rows[0]
    per_token = max([0.0] + [(r["peak_rss_bytes"] - base["peak_rss_bytes"]) / (r["generated_tokens"] -
                     base["generated_tokens"]) for r in rows[1:] if r["generated_tokens"] > base["generated_tokens"]])
    per_request = max([0.0] + [(r["peak_rss_bytes"] - base["peak_rss_bytes"]) / (r["requests"] - base["requests"])
                               for r in rows[1:] if r["requests"] > base["requests"]])
    grow = max(per_token * (tokens - base["generated_tokens"]), per_request * (requests - base["requests"]), 0)
    projected = int(base["peak_rss_bytes"] + grow)
    return {"bench": "run_memory", "target": f"the full hour of the {name} trace fits in 2 GiB", "trace": name,
            "hour_requests": requests, "hour_generated_tokens": tokens, "bytes_per_request": round(per_request, 1),
            "projected_peak_rss_bytes": projected, "met": projected <= TARGET_HOUR_BYTES}


def report(rows: list[dict]) -> None:
    """The lines after the runs': bytes per token between every pair, the target, each hour's projection."""
    pairs = []
    for i, a in enumerate(rows):  # every pair, the first's among them
        for b in rows[i + 1:]:
            s = slope(a, b)
            pairs.append(s)
            print(json.dumps({"bench": "run_memory", "between": [a["requests"], b["requests"]],
                              "extra_generated_tokens": b["generated_tokens"] - a["generated_tokens"],
                              "bytes_per_token": s, "target_bytes_per_token": TARGET_BYTES_PER_TOKEN,
                              "met": s is not None and s <= TARGET_BYTES_PER_TOKEN}))
    beyond = [r["bytes_per_token_beyond_first"] for r in rows[1:] if r["bytes_per_token_beyond_first"] is not None]
    worst = max(beyond) if beyond else None
    print(json.dumps({"bench": "run_memory", "target": f"peak RSS grows by at most {TARGET_BYTES_PER_TOKEN} B per "
                      "generated token beyond the first run's", "measured": worst,
                      "worst_between_any_two": max((s for s in pairs if s is not None), default=None),
                      "met": worst is not None and worst <= TARGET_BYTES_PER_TOKEN}))
    for name, path in TRACES.items():  # the hour's outputs, uncapped
        print(json.dumps(hour(rows, name, *hour_totals(path))), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--requests", default="500,1000,2000", help="request counts, comma-separated (first: the base)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each count (the median peak RSS is reported)")
    ap.add_argument("--one", nargs=2, metavar=("TRACE", "N"), help=argparse.SUPPRESS)  # a child process's run
    ap.add_argument("--smoke", action="store_true", help="5 and 10 requests, once")
    ap.add_argument("--pool", choices=["system", "mimalloc", "jemalloc"], default="",
                    help="Arrow's memory pool for the runs (default: the one a run sets, the system allocator)")
    args = ap.parse_args()
    if args.smoke:
        args.requests, args.repeat = "5,10", 1
    if args.one:
        print(json.dumps(one_run(args.one[0], int(args.one[1]))))
        return
    counts = [int(x) for x in args.requests.split(",")]
    trace = TRACES["conversation"]
    measure(trace, min(5, *counts), 1, args.pool)  # a short run first (not kept): every measured run loads
    rows = []  # numba's compiled kernels from its disk cache (one compiling them peaked 18 MB higher at 500 requests)
    for n in counts:
        r = measure(trace, n, args.repeat, args.pool)
        r["bytes_per_token_beyond_first"] = slope(rows[0], r) if rows else None
        rows.append(r)
        print(json.dumps({"bench": "run_memory", **r, "pool": args.pool or "system",
                          "target_bytes_per_token": TARGET_BYTES_PER_TOKEN}), flush=True)
    report(rows)


if __name__ == "__main__":
    main()
