"""One serving anchor simulated standalone and timed: CPU seconds beside the target, as JSON lines.

    python benchmarks/anchor_speed.py                      # a 4,096-token prefill on one sn40l (minutes)
    python benchmarks/anchor_speed.py --tokens 512 --runs 3  # a 512-token prefill, median of 3
    python benchmarks/anchor_speed.py --tokens 1024 --profile out.prof   # one run under cProfile
    python benchmarks/anchor_speed.py --smoke              # a 64-token prefill on an 8 x 16 sn40l (seconds)

An anchor (sim/workloads/serve/anchors.py) is a serving step's one-layer plan of
Llama-3.1-8B mapped by DFModel's MILP, kernel-looped, placed and simulated cycle by cycle on
the chip over the packet NoC; a serving run's cold cost is nearly all its anchors. This
times ``simulate_anchor`` in this process (``time.process_time``: the machine is shared, so
CPU seconds, not wall; the median of ``--runs``), the mapping and placement included (the
compiled kernels loaded first, by the smoke anchor: a changed source compiles them anew), and
prints the run's cycles, messages and a digest of everything the anchor returns (its
iterations' end cycles, its MU occupancy and tier traffic): a speed-up must leave the digest
unchanged. Target: the 4,096-token prefill anchor in 20 CPU s or less (82 s before this
benchmark's work, one at a time on an idle machine: docs/run.md, "Serving real models").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

TARGET = 20.0  # CPU seconds of the 4,096-token prefill anchor
SMOKE_CHIP = {"preset": "sn40l", "rows": 8, "cols": 16}
# digests of anchors as the simulator gave them before its speed-ups (a speed-up keeps them; a change
# to what is simulated changes them, and says so in its commit)
RECORDED = {
    "prefill 64 (sn40lx8x16, 4 tiles, 4 iterations)": "20d9faff08627f0b",
    "prefill 512 (sn40l, 32 tiles, 20 iterations)": "9d007d1e90b0bb59",
    "prefill 1024 (sn40l, 32 tiles, 20 iterations)": "3752f63aabf123c4",
    "prefill 4096 (sn40l, 32 tiles, 20 iterations)": "c34756945a4ec011",
}
SMOKE_KEYS = (("bench", "anchor", "cpu_seconds", "runs", "cpu_seconds_each", "cycles", "messages", "digest",
               "digest_as_recorded", "target_cpu_seconds", "meets_target", "load_average"),)


def _cfg(chip: dict):
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, chip_config

    return chip_config(load(RUN_SCHEMA, raw={"chip": chip, "noc": {"model": "packet"},
                                             "memory": {"policy": "virtual"},
                                             "workload": {"kind": "serve", "decode": {"model": "llama-3.1-8b"}},
                                             "run": {"max_cycles": 10**12}}))


def digest(run) -> str:
    """A short hash of what the anchor returns (its StepPlanRun): equal digests, equal anchors."""
    return hashlib.sha256(repr(run).encode()).hexdigest()[:16]


def time_anchor(chip: dict, tokens: int, tiles: int, profile: str = "") -> tuple[float, object]:
    """(CPU seconds, StepPlanRun) of one prefill anchor of ``tokens`` on ``chip``."""
    from mapping.models import model_preset
    from sim.workloads.serve.anchors import simulate_anchor
    from sim.workloads.serve.shapes import StepShape

    cfg = _cfg(chip)
    model = model_preset("llama-3.1-8b")
    shape = StepShape.of([], [(tokens, 0, True)])
    if profile:
        import cProfile

        prof = cProfile.Profile()
        t0 = time.process_time()
        run = prof.runcall(simulate_anchor, cfg, model, shape, tiles)
        cpu = time.process_time() - t0
        prof.dump_stats(profile)
        return cpu, run
    t0 = time.process_time()
    run = simulate_anchor(cfg, model, shape, tiles)
    return time.process_time() - t0, run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="a 64-token prefill on an 8 x 16 sn40l: seconds")
    ap.add_argument("--tokens", type=int, default=4096, help="prompt tokens of the prefill anchor")
    ap.add_argument("--tiles", type=int, default=32, help="tiles a layer at most (a serving run's default)")
    ap.add_argument("--runs", type=int, default=1, help="runs to take the median CPU seconds of")
    ap.add_argument("--profile", default="", help="write one run's cProfile stats to this file")
    ap.add_argument("--rows", type=int, default=0, help="the sn40l's grid cut to this many rows (0: its 40)")
    ap.add_argument("--cols", type=int, default=0, help="... and columns (0: its 52)")
    args = ap.parse_args(argv)
    if args.tokens < 1 or args.runs < 1 or args.tiles < 1 or args.rows < 0 or args.cols < 0:
        print("anchor_speed: --tokens, --tiles and --runs must be positive, --rows and --cols not negative",
              file=sys.stderr)
        return 2
    chip, tokens, tiles = {"preset": "sn40l"}, args.tokens, args.tiles
    chip.update({k: v for k, v in (("rows", args.rows), ("cols", args.cols)) if v})
    if args.smoke:
        chip, tokens, tiles = SMOKE_CHIP, 64, 4
    if not args.smoke:  # the compiled kernels loaded (or compiled, after a change) before any run is timed
        time_anchor(SMOKE_CHIP, 64, 4)
    times, digests, run = [], set(), None
    for _ in range(1 if args.profile else args.runs):
        cpu, run = time_anchor(chip, tokens, tiles, args.profile)
        times.append(cpu)
        digests.add(digest(run))
    if len(digests) > 1:
        print(f"anchor_speed: the runs disagree: digests {sorted(digests)}", file=sys.stderr)
        return 1
    cpu = statistics.median(times)
    label = "x".join(str(v) for v in chip.values())
    name = f"prefill {tokens} ({label}, {run.tiles} tiles, {run.iterations} iterations)"
    whole = tokens == 4096 and chip == {"preset": "sn40l"}
    digest_now = digests.pop()
    print(json.dumps({"bench": "anchor_speed", "anchor": name, "cpu_seconds": round(cpu, 2), "runs": len(times),
                      "cpu_seconds_each": [round(t, 2) for t in times], "cycles": run.end, "messages": run.messages,
                      "digest": digest_now, "digest_as_recorded": RECORDED[name] == digest_now
                      if name in RECORDED else None,
                      "target_cpu_seconds": TARGET, "meets_target": cpu <= TARGET if whole else None,
                      "load_average": round(os.getloadavg()[0], 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
