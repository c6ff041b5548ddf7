"""rdasim evaluate's cost: per study the point-seconds (each point's time on its core: its CPU seconds on
unshared cores; in-process, also this process's CPU seconds), points, anchors simulated and reused, and the wall time
projected for 16 nodes x 2 cores from the sweep's own dispatch order. Prints JSON lines.

    python benchmarks/evaluation.py                 # rdasim evaluate --quick, cold, into a fresh directory
    python benchmarks/evaluation.py --full          # the whole evaluation (hours on 2 cores; it resumes)
    python benchmarks/evaluation.py --out DIR       # ... into DIR (run again to resume; stored points reused)
    python benchmarks/evaluation.py --smoke         # one small study in this process: what the suite runs

Targets (the issue): --quick at most 15 minutes of wall time on this 2-core machine, cold; the full
evaluation at most 1 hour projected on 16 nodes x 2 cores. The machine is shared: the load average
before and after is printed beside the times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

TARGET_QUICK_SECONDS = 15 * 60  # --quick, cold, this machine
TARGET_PROJECTED_SECONDS = 3600  # the full evaluation on 16 nodes x 2 cores
SMOKE_STUDIES = ("switch",)
SMOKE_KEYS = (("bench", "study", "points", "point_seconds", "here_cpu_seconds", "anchors_simulated",
               "anchors_reused", "projected_wall_seconds_16x2", "checks_held", "checks"),
              ("bench", "study", "wall_seconds", "point_seconds", "here_cpu_seconds", "projected_wall_seconds_16x2",
               "target_seconds", "meets_target", "load_before", "load_after"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="the whole evaluation, not --quick")
    ap.add_argument("--smoke", action="store_true", help="one small study, in this process")
    ap.add_argument("--out", metavar="DIR", help="evaluation directory (default: a fresh temporary one)")
    args = ap.parse_args()
    from cluster.cli import main as cli

    with tempfile.TemporaryDirectory(prefix="rdasim-evaluation-") as tmp:
        out = args.out or tmp
        argv = ["evaluate", "--out", out, "--quiet"] + ([] if args.full else ["--quick"])
        if args.smoke:
            argv += ["--in-process"] + [a for s in SMOKE_STUDIES for a in ("--only", s)]
        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        status = cli(argv)
        wall = time.perf_counter() - start
        data = json.loads((Path(out) / "evaluation.json").read_text())
    for row in data["studies"]:
        print(json.dumps({"bench": "evaluation", **row}), flush=True)
    quick = not args.full
    target = TARGET_QUICK_SECONDS if quick else TARGET_PROJECTED_SECONDS
    measured = wall if quick else data["projected_wall_seconds_16x2"]
    print(json.dumps({"bench": "evaluation", "study": "all", "mode": "smoke" if args.smoke else
                      "quick" if quick else "full", "exit_status": status, "wall_seconds": round(wall, 1),
                      "point_seconds": data["point_seconds"], "here_cpu_seconds": data["here_cpu_seconds"],
                      "projected_wall_seconds_16x2": data[
                          "projected_wall_seconds_16x2"], "target_seconds": target,
                      "meets_target": measured <= target, "load_before": round(load_before, 2),
                      "load_after": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
