"""Running a sweep: skip what is stored, run the rest on Ray, store each point as it finishes.

Resuming is the normal case: the points whose valid result file exists are skipped (a
rerun after a killed driver computes only what is missing), the others go to Ray, and
the manifest records the run. ``retry_failed`` also reruns the points stored as errors.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cluster import schemas
from cluster.progress import Progress
from cluster.sweep.layout import DatasetLayout
from cluster.sweep.manifest import DONE, FAILED, PENDING, Manifest, PointEntry, RunEntry, now
from cluster.sweep.plan import SweepPlan
from cluster.sweep.points import Point
from cluster.sweep.records import STATUS_OK, PointRun
from cluster.sweep.store import Store

MANIFEST_EVERY_SECONDS = 2.0


@dataclass(frozen=True)
class SweepSummary:
    name: str
    dataset: Path
    manifest: Path
    total: int
    skipped: int  # already stored before this run
    computed: int  # finished in this run (ok or error)
    failed: int  # stored as errors after this run (all points)
    seconds: float


def _manifest(plan: SweepPlan, layout: DatasetLayout, store: Store, stored: dict[str, str]) -> Manifest:
    spec = plan.spec
    old = Manifest.load(layout.manifest) if layout.manifest.is_file() else None
    m = Manifest(
        sweep=spec.name, command=spec.command, description=spec.description, spec=spec.raw,
        spec_path=str(spec.source), partition_by=list(spec.partition_by),
        columns={f.name: str(f.type) for f in plan.axes.fields},
        created=old.created if old else now(), runs=old.runs if old else [],
    )
    for p in plan.points:
        prev = old.points.get(p.id) if old else None
        status = {STATUS_OK: DONE, None: PENDING}.get(stored.get(p.id), FAILED)
        m.points[p.id] = PointEntry(
            p.index, p.values, str(store.path(p).relative_to(layout.root)), status,
            prev.attempts if prev else 0, prev.seconds if prev and status != PENDING else None,
            prev.error if prev and status == FAILED else None)
    return m


def _describe(point: Point) -> str:
    shown = ", ".join(f"{k}={v!r}" for k, v in point.values.items())
    return f"point {point.index} ({shown})" if shown else f"point {point.index}"


def run_sweep(plan: SweepPlan, out: str | Path, address: str | None = None, max_concurrency: int | None = None,
              quiet: bool = False, retry_failed: bool = False, in_process: bool = False) -> SweepSummary:
    """Run the plan's missing points into ``out``; ``in_process`` runs them here, one by one, without Ray."""
    start = time.perf_counter()
    layout = DatasetLayout(Path(out), plan.spec.name, plan.spec.partition_by)
    store = Store(plan, layout)
    store.remove_orphans()
    stored = {p.id: s for p in plan.points if (s := store.existing(p)) is not None}
    todo = [p for p in plan.points if p.id not in stored or (retry_failed and stored[p.id] != STATUS_OK)]
    manifest = _manifest(plan, layout, store, stored)
    run = RunEntry(now(), socket.gethostname(), os.getpid(), address, schemas.package_version(),
                   to_run=len(todo), skipped=len(plan.points) - len(todo))
    manifest.runs.append(run)
    manifest.save(layout.manifest)
    log = (lambda msg: None) if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    log(f"sweep {plan.spec.name}: {len(plan.points)} points, {run.skipped} already stored, {len(todo)} to run"
        + (f" ({plan.duplicates} duplicate combinations dropped)" if plan.duplicates else ""))
    try:
        if todo:
            _execute(plan, todo, store, manifest, run, layout, address,
                     max_concurrency or plan.spec.max_concurrency, quiet, log, in_process)
        run.state = "finished"
    except BaseException:
        run.state = "interrupted"
        raise
    finally:
        run.ended = now()
        manifest.save(layout.manifest)
    counts = manifest.counts()
    return SweepSummary(plan.spec.name, layout.dataset, layout.manifest, len(plan.points), run.skipped,
                        run.computed, counts[FAILED], time.perf_counter() - start)


def _execute(plan, todo, store: Store, manifest: Manifest, run: RunEntry, layout: DatasetLayout, address,
             max_concurrency, quiet, log, in_process) -> None:
    from cluster.sweep.execute import Executor, InProcessExecutor

    if in_process:
        executor = InProcessExecutor(plan.command.name)
    else:
        from cluster.ray_env import init_ray

        executor = Executor(init_ray(address), plan.command.name, plan.spec.max_retries, max_concurrency)
    progress = Progress(f"sweep {plan.spec.name}", quiet)
    saved_at, save_every = time.monotonic(), MANIFEST_EVERY_SECONDS

    def tick():
        nonlocal saved_at, save_every
        if 0 < run.computed < len(todo):  # no rate before the first point; done() prints the last
            progress(run.computed, len(todo), unit="points")
        if time.monotonic() - saved_at > save_every:
            start = time.monotonic()
            manifest.save(layout.manifest)
            saved_at = time.monotonic()
            save_every = max(MANIFEST_EVERY_SECONDS, 20 * (saved_at - start))  # huge manifests: <= 5 % of the time

    def done(point: Point, outcome, point_run: PointRun):
        point_run = store.write(point, outcome.tables if outcome else None, point_run)
        entry = manifest.points[point.id]
        entry.status = DONE if point_run.status == STATUS_OK else FAILED
        entry.attempts, entry.seconds, entry.error = point_run.attempts, point_run.seconds, point_run.error
        run.computed += 1
        if point_run.status != STATUS_OK:
            run.failed += 1
            log(f"{_describe(point)} failed: {point_run.error}")
        progress(run.computed, len(todo), unit="points")
        tick()

    try:
        executor.run(todo, done, tick)
    finally:
        progress.close()
