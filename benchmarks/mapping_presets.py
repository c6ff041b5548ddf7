"""Solve every published DFModel preset and print one JSON line each, with the published figure.

    python benchmarks/mapping_presets.py [--repeats 3] [--preset NAME]
    python benchmarks/mapping_presets.py --smoke     # two presets once: what the test suite runs

solver_seconds is the median over the repeats (the machine is shared, timings are noisy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mapping.presets import PUBLISHED, SPECS, preset  # noqa: E402
from mapping.solver import solve  # noqa: E402

SMOKE_PRESETS = ["megatron-145b-a100", "gpt3-1t-4layer-2pp-sn30"]  # --smoke: two quick ones, both published
# the shape of the JSON lines (tests/test_benchmarks.py runs --smoke and checks it)
SMOKE_KEYS = (("preset", "seconds_per_batch", "solver_seconds", "published", "seconds_vs_published"),)


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--preset", action="append", help="only these presets")
    parser.add_argument("--smoke", action="store_true", help=f"{', '.join(SMOKE_PRESETS)}, once")
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.preset = 1, args.preset or SMOKE_PRESETS
    for name in args.preset or list(SPECS):
        plans = [solve(preset(name)) for _ in range(args.repeats)]
        plan = plans[0]
        row = {"preset": name}
        row.update(plan.summary())
        row["solver_seconds"] = statistics.median(p.solver_seconds for p in plans)
        row["solver_seconds_runs"] = [round(p.solver_seconds, 4) for p in plans]
        pub = PUBLISHED.get(name)
        if pub:
            keys = ("seconds_per_batch", "utilization", "cost", "power", "solver_seconds")
            row["published"] = {k: pub[k] for k in keys}
            row["published_note"] = pub["note"]
            row["seconds_vs_published"] = plan.seconds_per_batch / pub["seconds_per_batch"] - 1
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
