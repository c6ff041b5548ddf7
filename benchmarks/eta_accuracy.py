"""How honest the ETA is: the time left a progress line says, against the truth, at 20, 50
and 80 % of a run's wall time. Prints JSON lines, each ratio beside the target (within 2x: 0.5 to 2).

    python benchmarks/eta_accuracy.py              # live: the README's commands and the policy sweep
    python benchmarks/eta_accuracy.py --cold       # ... with an empty kernel cache (the first run ever)
    python benchmarks/eta_accuracy.py --quick      # the estimator replayed on recorded point seconds (seconds)
    python benchmarks/eta_accuracy.py --smoke      # the replay of one sweep and a live 30-point noop sweep, once

Live: each command runs with stderr sent to a pipe (as to a file: a line every few seconds), every progress
line is stamped as it arrives, and at each share s of the run's wall time T the last estimate shown at or
before s x T is compared with the time that was really left then (T less the line's time). "not shown"
means no estimate had a basis yet (no point run on a warm worker had finished). The commands: the main job
(`rdasim noc --backend ray`, 8 loads on Ray), `rdasim sweep examples/sweep_noc.toml` (60 points), the policy
sweep (examples/sweep_policies.toml, 60 points costing 0.05-12 s) and `rdasim explore examples/explore_kv.toml
--budget 6 --in-process`. Quick: the example sweeps' recorded point seconds (tests/data/eta) replayed through
the estimator on two workers, in the order a sweep runs them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARES = (0.2, 0.5, 0.8)
LEFT = re.compile(r"about ([0-9.]+) (s|min|h) left")
UNIT = {"s": 1.0, "min": 60.0, "h": 3600.0}
# the shapes of the JSON lines (tests/test_benchmarks.py runs --smoke and checks them)
SMOKE_KEYS = (("benchmark", "command", "name", "seconds", "exit", "estimates", "load_before", "target",
               "ratio_at_20", "at_20", "ratio_at_50", "at_50", "ratio_at_80", "at_80"),
              ("benchmark", "sweep", "replayed_seconds", "target", "ratio_at_20", "at_20", "ratio_at_50", "at_50",
               "ratio_at_80", "at_80", "seconds"))
SMOKE_SPEC = """[sweep]
name = "eta-smoke"
command = "noop"
[axes]
noop.value = [1.0, 2.0, 3.0, 4.0, 5.0]
noop.sleep = [0.01, 0.05, 0.2]
noop.fail = [false, true]
"""


def _verdict(ratio: float | None) -> str:
    if ratio is None:
        return "not shown"
    return "within 2x" if 0.5 <= ratio <= 2.0 else "outside 2x"


def live(name: str, argv: list[str], env: dict) -> dict:
    """Run ``rdasim argv``, stamping each progress line; the estimate's ratio to the truth at each share."""
    start = time.perf_counter()
    load = round(os.getloadavg()[0], 2)
    proc = subprocess.Popen([sys.executable, "-m", "cluster.cli", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    stamped = []
    assert proc.stderr is not None
    for line in proc.stderr:
        m = LEFT.search(line)
        if m:
            stamped.append((time.perf_counter() - start, float(m.group(1)) * UNIT[m.group(2)]))
    proc.wait()
    total = time.perf_counter() - start
    row = {"benchmark": "eta", "command": f"rdasim {' '.join(argv)}", "name": name, "seconds": round(total, 1),
           "exit": proc.returncode, "estimates": len(stamped), "load_before": load,
           "load_after": round(os.getloadavg()[0], 2), "target": "ratio within 0.5-2 at each share"}
    for share in SHARES:
        shown = [(t, left) for t, left in stamped if t <= share * total]
        ratio = round(shown[-1][1] / (total - shown[-1][0]), 2) if shown and total > shown[-1][0] else None
        row[f"ratio_at_{int(share * 100)}"] = ratio
        row[f"at_{int(share * 100)}"] = _verdict(ratio)
    return row


def quick(specs: tuple[str, ...] = ("sweep_policies.toml", "sweep_noc.toml", "sweep_run.toml")) -> None:
    """The recorded point seconds of the example sweeps, replayed (cluster/progress_replay.py)."""
    from cluster.progress_replay import replay, shown_at
    from cluster.sweep.cost import features, prior
    from cluster.sweep.plan import plan_sweep
    from cluster.sweep.resume import interleaved

    recorded = json.loads((ROOT / "tests" / "data" / "eta" / "point_seconds.json").read_text())
    for spec in specs:
        start = time.perf_counter()
        plan = plan_sweep(ROOT / "examples" / spec)
        cost = dict(zip((p.id for p in plan.points), recorded[spec]))
        points = interleaved(plan.points)
        costs = [cost[p.id] + (recorded["start_up"][spec] if i < 2 else 0.0) for i, p in enumerate(points)]
        said = replay(costs, [features(p.values) for p in points], parallel=2,
                      priors=[prior(plan.command.name, p.config) for p in points])
        total = said[-1].at + 1
        row = {"benchmark": "eta_replay", "sweep": spec, "replayed_seconds": round(total, 1),
               "target": "ratio within 0.5-2 at each share"}
        for share in SHARES:
            found = shown_at(said, total, share)
            ratio = round(found.left / found.truth, 2) if found else None
            row[f"ratio_at_{int(share * 100)}"] = ratio
            row[f"at_{int(share * 100)}"] = _verdict(ratio)
        row["seconds"] = round(time.perf_counter() - start, 2)
        print(json.dumps(row), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="replay recorded point seconds (seconds)")
    parser.add_argument("--cold", action="store_true", help="an empty NoC kernel cache, as on a first run")
    parser.add_argument("--smoke", action="store_true", help="one replay and a live 30-point noop sweep, in seconds")
    args = parser.parse_args()
    if args.quick:
        quick()
        return 0
    with tempfile.TemporaryDirectory(prefix="rdasim-eta-") as work:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if args.smoke:
            quick(("sweep_noc.toml",))
            spec = Path(work) / "smoke.toml"
            spec.write_text(SMOKE_SPEC)
            row = live("noop sweep", ["sweep", str(spec), "--out", f"{work}/smoke", "--in-process"], env)
            print(json.dumps(row), flush=True)
            return 0
        if args.cold:
            env["NUMBA_CACHE_DIR"] = str(Path(work) / "numba")
        examples = ROOT / "examples"
        for name, argv in (
                ("main job", ["noc", "--backend", "ray", "--out", f"{work}/noc"]),
                ("noc sweep", ["sweep", str(examples / "sweep_noc.toml"), "--out", f"{work}/sweeps"]),
                ("policy sweep", ["sweep", str(examples / "sweep_policies.toml"), "--out", f"{work}/sweeps"]),
                ("explore", ["explore", str(examples / "explore_kv.toml"), "--out", f"{work}/explore", "--budget", "6",
                             "--in-process"])):
            print(json.dumps(live(name, argv, env)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
