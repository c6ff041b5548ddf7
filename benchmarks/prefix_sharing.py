"""Prefix sharing on the published-shaped traces of tests/data/traces. Prints
JSON lines.

    python benchmarks/prefix_sharing.py          # both traces, every case (about a minute)
    python benchmarks/prefix_sharing.py --quick  # 6 Qwen-Bailian requests, sharing on and off (seconds)
    python benchmarks/prefix_sharing.py --smoke  # the same: what the test suite runs

For a Mooncake (30 lines of ``mooncake_trace.jsonl``) and a Qwen-Bailian shaped trace
(``qwen_traceA_blksz_16.jsonl``), on plasticine with one layer and head of 16 B a token, 16
sequences at once, outputs capped at 64 tokens and the arrivals sped up 10^4 times: the
run without sharing, with sharing under each reclamation protocol, and with a 4 MiB prefix
cache; each line gives the hit figures, ``kv_bytes_saved``, peak MU utilisation, the
protocol's messages and the oracle's verdict, beside ``ideal_hit_blocks``: the hits if every
earlier prompt's blocks were kept, counted from the ``hash_ids`` alone. docs/traces.md quotes
them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRACES = {"mooncake": ("tests/data/traces/mooncake/mooncake_trace.jsonl", 512),
          "qwen-bailian": ("tests/data/traces/qwen-bailian/qwen_traceA_blksz_16.jsonl", 16)}
CASES = {"no sharing": {"prefix_sharing": False}, "refcount": {"reclaim": "refcount"},
         "refcount-gated": {"reclaim": "refcount-gated"}, "partial-free": {"reclaim": "partial-free"},
         "refcount-gated, 4 MiB cache": {"reclaim": "refcount-gated", "prefix_cache_bytes": "4MiB"}}
FIGURES = ("status", "requests_finished", "prefix_blocks", "prefix_hit_blocks", "prefix_hit_rate", "prefix_hit_bytes",
           "kv_bytes_saved", "peak_mu_utilization", "sim_cycles", "sync_messages", "premature_free", "use_after_free",
           "double_free", "leaks")
# the shape of the JSON lines (tests/test_benchmarks.py runs --smoke and checks it)
SMOKE_KEYS = (("bench", "trace", "case", "status", "prefix_blocks", "prefix_hit_blocks", "ideal_hit_blocks",
               "messages"),)


def ideal_hits(path: Path, block: int, requests: int = 0) -> tuple[int, int]:
    """(shareable blocks, hits) of the first ``requests`` (0: all) when every earlier prompt's blocks
    are kept: a block is its prefix of ids, a prompt of n tokens shares its first (n - 1) // block."""
    seen: set[tuple[int, ...]] = set()
    blocks = hits = 0
    lines = path.read_text().splitlines()
    for line in lines[:requests] if requests else lines:
        r = json.loads(line)
        keys = [tuple(r["hash_ids"][:j + 1]) for j in range(min(len(r["hash_ids"]), (r["input_length"] - 1) // block))]
        blocks += len(keys)
        hits += next((j for j, k in enumerate(keys) if k not in seen), len(keys))
        seen.update(keys)
    return blocks, hits


def config(trace: Path, memory: dict, requests: int = 0) -> dict:
    return {"chip": {"preset": "plasticine"}, "memory": {"reclaim": "refcount-gated", **memory},
            "workload": {"kind": "kv-decode", "decode": {
                "trace": str(trace), "trace_speedup": 1e4, "requests": requests, "max_batch": 16, "layers": 1,
                "heads": 1, "head_dim": 16, "dtype_bytes": 1, "max_output_tokens": 64}}}


def main() -> None:
    from tests.sim.chip.chiprun import run

    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the Qwen-Bailian trace's first 6 requests, without and "
                    "with sharing only")
    ap.add_argument("--smoke", action="store_true", help="as --quick (tests/test_benchmarks.py)")
    args = ap.parse_args()
    args.quick = args.quick or args.smoke
    traces = {"qwen-bailian": TRACES["qwen-bailian"]} if args.quick else TRACES
    cases = {k: CASES[k] for k in ("no sharing", "refcount-gated")} if args.quick else CASES
    for name, (rel, block) in traces.items():
        path = ROOT / rel
        blocks, hits = ideal_hits(path, block, 6 if args.quick else 0)
        for case, memory in cases.items():
            t = time.perf_counter()
            s = run(config(path, memory, 6 if args.quick else 0)).summary
            msgs = {k: s["messages"][k] for k in ("reference", "ref_inc", "ref_dec", "weight_return", "weight_request")}
            print(json.dumps({"bench": "prefix_sharing", "trace": name, "case": case, **{k: s[k] for k in FIGURES},
                              "ideal_blocks": blocks, "ideal_hit_blocks": hits, "messages": msgs,
                              "wall_seconds": round(time.perf_counter() - t, 1)}), flush=True)


if __name__ == "__main__":
    main()
