"""The public Azure 2023 code hour, whole, served by Llama-3.1-8B on one sn40l socket: cold, then
again with its anchors stored. One JSON line a run, each figure beside its target.

    python benchmarks/full_length.py            # the hour (8,819 requests): about 25 min cold on 2 busy cores
    python benchmarks/full_length.py --smoke    # its first 2 s on an 8 x 16 sn40l, one anchor: seconds
    python benchmarks/full_length.py --matrix --out DIR          # every policy x on_oom over the hour, one sweep
    python benchmarks/full_length.py --matrix --smoke            # 2 x 2 points of the 2 s window: seconds
    python benchmarks/full_length.py --matrix --out DIR --status # what DIR holds, the rest projected; runs nothing

examples/serve_llama8b_sn40l.toml with the trace tests/data/traces/azure2023-hour (the whole
file, recorded times, prompts uncapped) and a fresh step cache directory (a temporary one): the
cold run simulates every anchor and stores it (sim/workloads/serve/cache.py), the warm run takes
them all from the store. Targets (issue's): the cold hour in at most 30 minutes on this 2-core
machine, at least 4 simulated seconds per wall second once the anchors are stored, peak memory
at most 2 GiB. ``peak_rss_bytes`` is this process's high-water mark so far (Linux ``ru_maxrss``)
and its anchor workers' (the largest child's): the warm run's includes the cold one's.

``--matrix``: the policy matrix, every memory policy x every on_oom the config schema offers,
over the same hour, as one sweep (cluster/sweep: resumable, each point stored once) whose points
share one anchor store (the sweep's ``step_cache``, DIR/anchors: on_oom is out of an
anchor's key unless its own run ran out of memory, so each policy's first point simulates its
anchors and the others read them). The spec is written to DIR/<sweep>.toml. The points run here
one after another (the in-process executor: this process and its anchor workers, all the cores
it may use); each point's CPU seconds (this process and the anchor workers it reaped, around the
point's job) go to DIR/<sweep>-cpu.json as it ends. One JSON line a point, then a total: CPU
seconds, anchors simulated and reused, and the wall the sweep would take on 16 nodes x 2 cores
(32 workers, one point each, as a Ray sweep hands them out: cluster/evaluate/schedule.py's
makespan of the points' CPU seconds in the sweep's dispatch order), beside the issue's target of
an hour. With points missing (``--status`` while it runs, or a run cut short), each missing
point's CPU seconds are projected from those done: the median of the done points that
simulated anchors for a policy none of whose points is done yet, else the median of those that
reused them; ``points_projected`` says how many.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

EXAMPLE = os.path.join(HERE, "..", "examples", "serve_llama8b_sn40l.toml")
HOUR = os.path.join(HERE, "..", "tests", "data", "traces", "azure2023-hour", "AzureLLMInferenceTrace_code.csv")
TARGET_COLD_SECONDS = 1800.0
TARGET_WARM_SIM_PER_WALL = 4.0
TARGET_PEAK_BYTES = 2 << 30
MATRIX_CLUSTER = (16, 2)  # nodes x cores the matrix's wall is projected for
TARGET_MATRIX_SECONDS = 3600.0
SMOKE_KEYS = (("bench", "run", "wall_seconds", "target_cold_seconds", "cpu_seconds", "sim_seconds",
               "sim_seconds_per_wall_second", "target_sim_seconds_per_wall_second", "peak_rss_bytes",
               "target_peak_bytes", "meets_target", "status", "trace_requests", "requests_finished", "anchors",
               "anchors_cached", "generated_tokens", "ttft_p99_seconds", "tbt_p99_seconds", "e2e_p99_seconds",
               "result_hash"),)
# --matrix --smoke prints these (tests/test_full_length_matrix.py)
MATRIX_KEYS = (("bench", "sweep", "policy", "on_oom", "done", "status", "trace_requests", "requests_served",
                "point_cpu_seconds", "point_wall_seconds", "anchors_simulated", "anchors_reused", "result_hash"),
               ("bench", "sweep", "points", "points_done", "points_projected", "cpu_seconds", "anchors_simulated",
                "anchors_reused", "cluster", "projected_wall_seconds", "target_wall_seconds", "meets_target"))


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


def matrix_axes(smoke: bool) -> tuple[list[str], list[str]]:
    """Every memory policy and every on_oom the run config schema offers (``smoke``: two of each)."""
    from cluster.config.run import MEMORY

    policies, on_oom = list(MEMORY.fields["policy"].choices), list(MEMORY.fields["on_oom"].choices)
    if smoke:
        return ["virtual", "static-single"], ["stall", "preempt"]
    return sorted(policies, key=lambda p: p != "virtual"), on_oom  # the default first: the first the sweep runs


def _toml(v) -> str:
    return json.dumps(v) if isinstance(v, str) else repr(v)  # a TOML basic string, an int or a float


def matrix_spec(out: str, smoke: bool) -> str:
    """Write the matrix's sweep spec to ``out`` and return its path: the example as its base, the hour's
    keys as one-value axes, the anchor store as the sweep's step_cache (DIR/anchors), then on_oom x
    policy. The policy varies fastest so that the sweep's interleaved order (resume.interleaved:
    bit-reversed places) takes one policy's points first, its first simulating the anchors and the
    rest reusing them: a sweep cut short has measured both kinds of point to project the rest from."""
    name = "policy-matrix-smoke" if smoke else "policy-matrix-hour"
    policies, on_oom = matrix_axes(smoke)
    axes = {**{k: [v] for k, v in hour_overrides(None, smoke).items()}, "memory.on_oom": on_oom,
            "memory.policy": policies}
    lines = ["# written by benchmarks/full_length.py --matrix" + (" --smoke" if smoke else ""),
             f"base = {_toml(os.path.abspath(EXAMPLE))}", "", "[sweep]", f"name = {_toml(name)}", 'command = "run"',
             'description = "every memory policy x on_oom serving the Azure 2023 code hour, one anchor store"',
             'step_cache = "anchors"',
             "", "[axes]"] + [f'"{k}" = [{", ".join(_toml(x) for x in vs)}]' for k, vs in axes.items()]
    path = os.path.join(out, f"{name}.toml")
    text = "\n".join(lines) + "\n"
    if not os.path.exists(path) or open(path).read() != text:
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    return path


def _planned(config: dict) -> dict:
    """A point's config as planned: the sweep gives a serve point its ``step_cache`` when it runs it."""
    decode = {k: v for k, v in config["workload"]["decode"].items() if k != "step_cache"}
    return {**config, "workload": {**config["workload"], "decode": decode}}


class PointClock:
    """Each point's CPU seconds, kept in a JSON file as it ends: the in-process executor runs a point
    through cluster.sweep.execute.job_outcome, timed here around that call while ``timing``."""

    def __init__(self, path: str, plan):
        self.path, self.plan = path, plan
        self.seconds: dict[str, float] = json.load(open(path)) if os.path.exists(path) else {}

    def _save(self) -> None:
        with open(self.path + ".tmp", "w") as f:
            json.dump(self.seconds, f, indent=1)
        os.replace(self.path + ".tmp", self.path)

    @contextmanager
    def timing(self):
        from cluster.sweep import execute

        job = execute.job_outcome

        def timed(command: str, config: dict, node):
            c0 = _cpu()
            got = job(command, config, node)
            pid = next(p.id for p in self.plan.points if _planned(p.config) == _planned(config))
            self.seconds[pid] = round(_cpu() - c0, 2)
            self._save()
            return got

        execute.job_outcome = timed
        try:
            yield
        finally:
            execute.job_outcome = job


def projected(plan, rows: dict, cpu: dict) -> tuple[list[float] | None, int]:
    """Each point's CPU seconds in the sweep's dispatch order, a missing one projected (module docstring),
    and how many were projected; None with no point done (nothing to project from)."""
    from cluster.sweep.resume import interleaved

    def simulated(pid: str) -> bool:
        return int(rows[pid].get("anchors") or 0) > int(rows[pid].get("anchors_cached") or 0)

    done = [pid for pid in cpu if pid in rows]
    if not done:
        return None, len(plan.points)
    cold = [cpu[p] for p in done if simulated(p)]
    warm = [cpu[p] for p in done if not simulated(p)] or cold
    policies = {rows[p]["memory_policy"] for p in done}
    out, guessed = [], 0
    for p in interleaved(plan.points):
        if p.id in cpu and p.id in rows:
            out.append(cpu[p.id])
            continue
        guessed += 1
        first = p.values["memory.policy"] not in policies
        policies.add(p.values["memory.policy"])
        out.append(statistics.median(cold if first and cold else warm or [0.0]))
    return out, guessed


def matrix_lines(plan, out: str, cpu: dict) -> list[dict]:
    """One line a point (spec order), then the total."""
    from cluster.evaluate.run import read_rows
    from cluster.evaluate.schedule import makespan

    table = os.path.join(out, plan.spec.name, "run_summary")
    found = read_rows(Path(out), plan.spec.name, [p.id for p in plan.points]) if os.path.isdir(table) else []
    rows = {r["point_id"]: r for r in found}
    lines = []
    for p in plan.points:
        r = rows.get(p.id, {})
        sim = int(r.get("anchors") or 0) - int(r.get("anchors_cached") or 0)
        lines.append({"bench": "full_length", "sweep": plan.spec.name, "policy": p.values["memory.policy"],
                      "on_oom": p.values["memory.on_oom"], "done": bool(r), "status": r.get("status"),
                      "trace_requests": r.get("trace_requests"), "requests_served": r.get("requests_finished"),
                      "point_cpu_seconds": cpu.get(p.id), "point_wall_seconds": r.get("point_seconds"),
                      "anchors_simulated": sim if r else None, "anchors_reused": r.get("anchors_cached"),
                      "result_hash": r.get("result_hash")})
    seconds, guessed = projected(plan, rows, cpu)
    wall = None if seconds is None else round(makespan(seconds, MATRIX_CLUSTER[0] * MATRIX_CLUSTER[1]), 1)
    lines.append({"bench": "full_length", "sweep": plan.spec.name, "points": len(plan.points), "points_done": len(rows),
                  "points_projected": guessed, "cpu_seconds": None if seconds is None else round(sum(seconds), 2),
                  "anchors_simulated": sum(x["anchors_simulated"] or 0 for x in lines),
                  "anchors_reused": sum(x["anchors_reused"] or 0 for x in lines),
                  "cluster": f"{MATRIX_CLUSTER[0]}x{MATRIX_CLUSTER[1]}", "projected_wall_seconds": wall,
                  "target_wall_seconds": TARGET_MATRIX_SECONDS,
                  "meets_target": None if wall is None else wall <= TARGET_MATRIX_SECONDS})
    return lines


def matrix_main(out: str | None, smoke: bool, status: bool) -> int:
    """Run (or with ``status`` only read) the matrix sweep into ``out`` (None: a temporary directory) and
    print its lines."""
    from cluster.sweep.known import stored_plan
    from cluster.sweep.plan import plan_sweep
    from cluster.sweep.runner import run_sweep

    if status and not out:
        print("error: --status needs --out DIR (the matrix's directory)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        out = out or tmp
        os.makedirs(out, exist_ok=True)
        plan = stored_plan(plan_sweep(matrix_spec(out, smoke)), out)  # points stored under earlier ids keep them
        clock = PointClock(os.path.join(out, f"{plan.spec.name}-cpu.json"), plan)
        if not status:
            with clock.timing():
                run_sweep(plan, out, in_process=True, quiet=smoke)
        for line in matrix_lines(plan, out, clock.seconds):
            print(json.dumps(line), flush=True)
    return 0


def hour_overrides(store: str | None, smoke: bool) -> dict:
    """The example's keys changed to serve the whole hour (``smoke``: its first 2 s on an 8 x 16 chip,
    one anchor a step kind), anchors kept in ``store``."""
    base = {"workload.decode.trace": os.path.abspath(HOUR), "workload.decode.trace_duration": 0,
            "run.max_cycles": 8 * 10**12, **({"workload.decode.step_cache": store} if store else {})}
    if smoke:
        base.update({"chip.rows": 8, "chip.cols": 16, "workload.decode.requests": 2,
                     "workload.decode.trace_duration": "2s", "workload.decode.step_anchor_ratio": 1e9,
                     "workload.decode.step_context_ratio": 1e9})
    return base


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="the hour's first 2 s on an 8 x 16 sn40l: seconds")
    ap.add_argument("--matrix", action="store_true", help="every memory policy x on_oom over the hour, one sweep")
    ap.add_argument("--out", help="--matrix: the sweep's directory, kept (a rerun resumes); default a temporary one")
    ap.add_argument("--status", action="store_true", help="--matrix --out DIR: print what DIR holds, run nothing")
    args = ap.parse_args(argv)
    if args.matrix:
        return matrix_main(args.out, args.smoke, args.status)
    if args.out or args.status:
        print("error: --out and --status go with --matrix", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as store:
        base = hour_overrides(os.path.join(store, "anchors"), args.smoke)
        for name in ("cold", "warm"):
            print(json.dumps(run_once(name, base)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
