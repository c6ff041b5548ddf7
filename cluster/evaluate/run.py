"""Run a study's sweep (the sweep machinery: resumable, each point exactly once, outcomes counted) and read
back its rows."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from cluster.evaluate.spec import spec_text, sweep_name
from cluster.evaluate.study import Row, Study
from cluster.sweep.outcomes import Outcomes


@dataclass(frozen=True)
class StudyRun:
    """A study's sweep once run: its rows (one a point, in the spec's order) and what it cost."""

    study: Study
    sweep: str
    spec_path: Path
    rows: list[Row]
    outcomes: Outcomes
    computed: int  # points simulated by this invocation
    reused: int  # points already stored (an earlier, interrupted or finished run)
    point_seconds: float  # the points' own seconds, summed (each runs on one core: its CPU time on unshared cores)
    dispatch_seconds: list[float]  # each point's seconds, in the order the sweep dispatches them
    here_cpu_seconds: float  # CPU this process (and children it waited for) used: all of it when in-process

    @property
    def anchors(self) -> tuple[int, int]:
        """(simulated, reused from a step cache) anchors over the study's serve points."""
        sim = sum(int(r.get("anchors") or 0) - int(r.get("anchors_cached") or 0) for r in self.rows)
        return sim, sum(int(r.get("anchors_cached") or 0) for r in self.rows)


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def read_rows(out: Path, sweep: str, point_ids: list[str]) -> list[Row]:
    """The sweep's run_summary rows of these points, in their order (a point with no row is left out)."""
    import pyarrow.dataset as ds

    table = ds.dataset(out / sweep / "run_summary", format="parquet", partitioning="hive").to_table()
    by_id = {r["point_id"]: r for r in table.to_pylist()}
    return [by_id[p] for p in point_ids if p in by_id]


def run_study(study: Study, out: Path, quick: bool, address: str | None, in_process: bool,
              quiet: bool, mix_code: bool = False) -> StudyRun:
    """Run the study's missing points into ``out`` and read its rows back."""
    from cluster.sweep.known import stored_plan
    from cluster.sweep.plan import plan_sweep
    from cluster.sweep.resume import interleaved
    from cluster.sweep.runner import run_sweep

    specs = out / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    name = sweep_name(study, quick)
    path = specs / f"{name}.toml"
    text = spec_text(study, quick)
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(".toml.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    plan = plan_sweep(path)
    cpu, start = _cpu(), time.perf_counter()
    summary = run_sweep(plan, out, address, None, quiet, False, in_process, mix_code=mix_code)
    here = _cpu() - cpu
    plan = stored_plan(plan, out)  # points stored under earlier ids are read by them
    ids = [p.id for p in plan.points]
    rows = read_rows(out, name, ids)
    seconds = {r["point_id"]: float(r.get("point_seconds") or 0.0) for r in rows}
    order = [seconds.get(p.id, 0.0) for p in interleaved(plan.points)]
    if not quiet:
        print(f"evaluate: {name}: {len(rows)} points, {sum(seconds.values()):.1f} point-seconds, {here:.1f} CPU s here "
              f"({time.perf_counter() - start:.1f} s wall here)", flush=True)
    return StudyRun(study, name, path, rows, summary.outcomes, summary.computed, summary.skipped,
                    sum(seconds.values()), order, here)
