"""How honest the ETA is: the time left a progress line says, against the truth, at 20, 50
and 80 % of a run's wall time. Prints JSON lines, each ratio beside the target (within 2x: 0.5 to 2).

    python benchmarks/eta_accuracy.py              # live: the README's commands and the policy sweep
    python benchmarks/eta_accuracy.py --cold       # ... with an empty kernel cache (the first run ever)
    python benchmarks/eta_accuracy.py --quick      # the estimator replayed on recorded point seconds (seconds)
    python benchmarks/eta_accuracy.py --smoke      # the replay of one sweep and a live 30-point noop sweep, once
    python benchmarks/eta_accuracy.py --serve      # a small serve run: its anchors' predicted seconds and ETA

Live: each command runs with stderr sent to a pipe (as to a file: a line every few seconds), every progress
line is stamped as it arrives, and at each share s of the run's wall time T the last estimate shown at or
before s x T is compared with the time that was really left then (T less the line's time). "not shown"
means no estimate had a basis yet (no point run on a warm worker had finished). The commands: the main job
(`rdasim noc --backend ray`, 8 loads on Ray), `rdasim sweep examples/sweep_noc.toml` (60 points), the policy
sweep (examples/sweep_policies.toml, 60 points costing 0.05-12 s) and `rdasim explore examples/explore_kv.toml
--budget 6 --in-process`. Quick: the example sweeps' recorded point seconds (tests/data/eta) replayed through
the estimator on two workers, in the order a sweep runs them; ``ratio_at_start`` is the estimate before any
point has run, from the points' predicted seconds (cluster/sweep/cost.py; calibrated on these same recordings).
Serve: a serve run of four requests on an 8 x 16 SN40L (the tests' chip) with two anchor workers, its progress
told to a sink in this process: each anchor's predicted seconds (sim/workloads/serve/progress.py) against its
measured wall seconds (run_anchors), and the anchors' time left as the line says it at each event against the
truth (when the last anchor ended), at the first estimate and at 20/50/80 % of the anchors' phase.
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
              ("benchmark", "sweep", "replayed_seconds", "target", "ratio_at_start", "at_start", "ratio_at_20",
               "at_20", "ratio_at_50", "at_50", "ratio_at_80", "at_80", "seconds"))
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
    from cluster.sweep.cost import START_UP_SECONDS, features, prior
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
                      priors=[prior(plan.command.name, p.config) for p in points], unit_seconds=1.0,
                      start_up=START_UP_SECONDS)
        total = said[-1].at + 1
        row = {"benchmark": "eta_replay", "sweep": spec, "replayed_seconds": round(total, 1),
               "target": "ratio within 0.5-2 at each share"}
        first = said[0]
        row["ratio_at_start"] = round(first.left / first.truth, 2) if first.left is not None else None
        row["at_start"] = _verdict(row["ratio_at_start"])
        for share in SHARES:
            found = shown_at(said, total, share)
            ratio = round(found.left / found.truth, 2) if found else None
            row[f"ratio_at_{int(share * 100)}"] = ratio
            row[f"at_{int(share * 100)}"] = _verdict(ratio)
        row["seconds"] = round(time.perf_counter() - start, 2)
        print(json.dumps(row), flush=True)


SERVE_TRACE = "TIMESTAMP,ContextTokens,GeneratedTokens\n0.0,40,4\n0.0,300,3\n0.0,20,5\n1.0,20,2\n"


def serve(work: Path) -> None:
    """A small serve run's anchors, predicted against measured, and the anchors' ETA against the truth."""
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, chip_config
    from cluster.jobs.chip import ChipGrid
    from cluster.jobs.job import simulate_case
    from cluster.progress import Progress
    from cluster.progress_serve import ServeLine
    from mapping.models import MODELS
    from sim.workloads.serve.figures import AnchorLog
    from sim.workloads.serve.progress import AnchorDone, Planned, anchor_seconds, simulated_iterations
    from sim.workloads.serve.shapes import StepShape

    trace = work / "trace.csv"
    trace.write_text(SERVE_TRACE)
    raw = {"chip": {"preset": "sn40l", "rows": 8, "cols": 16}, "noc": {"model": "packet"},
           "memory": {"policy": "virtual"}, "run": {"max_cycles": 10**12},
           "workload": {"kind": "serve", "decode": {"trace": str(trace), "model": "llama-3.1-8b", "step_workers": 2}}}
    cfg = chip_config(load(RUN_SCHEMA, raw=raw))
    said: list[tuple[float, float | None]] = []
    ends: list[float] = []
    first: set = set()  # the anchors each worker took first: theirs pay the worker's imports
    paid = [0.0]
    start = time.perf_counter()

    class Stamped(ServeLine):
        def __call__(self, event) -> None:
            super().__call__(event)
            now = time.perf_counter() - start
            if isinstance(event, AnchorDone):
                ends.append(now)
            if isinstance(event, Planned):
                first.update(a.shape for a in event.anchors[:event.workers])
                paid[0] = event.start_up
            if self.eta is not None and self.done < self.total:
                said.append((now, self.eta.remaining()))

    line = Stamped(Progress("run serve", quiet=True))
    done = simulate_case(ChipGrid(cfg).watched(line), progress=line.cycles)
    model = MODELS["llama-3.1-8b"]
    for a in (x for r in done.simulation.outcome.reports for x in r.logged if isinstance(x, AnchorLog)):
        shape = StepShape(a.tokens, a.keys, a.kv_read)
        predicted = anchor_seconds(model, shape, cfg.spec) + (paid[0] if shape in first else 0.0)
        ratio = round(predicted / a.wall_seconds, 2) if a.wall_seconds > 0 else None
        print(json.dumps({"benchmark": "anchor_seconds", "tokens": a.tokens, "keys": a.keys, "kv_read": a.kv_read,
                          "compute_bound": simulated_iterations(model, shape, cfg.spec, 32)[0],
                          "predicted_seconds": round(predicted, 2), "measured_seconds": round(a.wall_seconds, 2),
                          "ratio": ratio, "target": "ratio within 0.5-2", "verdict": _verdict(ratio)}), flush=True)
    last = max(ends) if ends else 0.0
    row = {"benchmark": "eta_anchors", "anchors": len(ends), "workers": 2, "anchors_seconds": round(last, 1),
           "run_seconds": round(time.perf_counter() - start, 1), "target": "ratio within 0.5-2 at each share"}
    shown = [(t, left) for t, left in said if left is not None and t < last]
    row["ratio_at_start"] = round(shown[0][1] / (last - shown[0][0]), 2) if shown else None
    row["at_start"] = _verdict(row["ratio_at_start"])
    for share in SHARES:
        before = [(t, left) for t, left in shown if t <= share * last]
        ratio = round(before[-1][1] / (last - before[-1][0]), 2) if before else None
        row[f"ratio_at_{int(share * 100)}"] = ratio
        row[f"at_{int(share * 100)}"] = _verdict(ratio)
    print(json.dumps(row), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="replay recorded point seconds (seconds)")
    parser.add_argument("--cold", action="store_true", help="an empty NoC kernel cache, as on a first run")
    parser.add_argument("--smoke", action="store_true", help="one replay and a live 30-point noop sweep, in seconds")
    parser.add_argument("--serve", action="store_true", help="a small serve run's anchors and their ETA (a minute)")
    args = parser.parse_args()
    if args.quick:
        quick()
        return 0
    if args.serve:
        with tempfile.TemporaryDirectory(prefix="rdasim-eta-") as work:
            serve(Path(work))
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
