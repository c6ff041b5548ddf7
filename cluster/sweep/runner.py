"""Running a sweep: skip what is stored (resume.py), run the rest on Ray, store each point as it finishes.

The points left to run go to Ray (or run here, one by one), each stored as it finishes
(records.py's store, through the one writer), and the manifest records the run; when it
ends, the sweep's tables are compacted as the spec or the caller says.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from cluster.config.run import workload_reads
from cluster.errors import UserError, WriteError
from cluster.progress import Progress, WorkEta
from cluster.results import io
from cluster.sweep import compact as compaction
from cluster.sweep.cost import START_UP_SECONDS, features, prior
from cluster.sweep.layout import DatasetLayout
from cluster.sweep.lock import sweep_lock
from cluster.sweep.manifest import DONE, FAILED, Manifest, RunEntry, now
from cluster.sweep.outcomes import Outcomes, read_outcomes
from cluster.sweep.plan import SweepPlan
from cluster.sweep.points import Point
from cluster.sweep.records import STATUS_OK, PointRun, Store
from cluster.sweep.resume import resume
from cluster.version import code_version

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
    outcomes: Outcomes = field(default_factory=Outcomes)  # every stored point by outcome (completed, deadlocked, ...)
    compaction: compaction.Compaction | None = None  # what compacting after the run did (None: not compacted)


EXISTING = ("refuse", "add", "replace")  # what to do when DIR holds this sweep from another spec version


def run_sweep(plan: SweepPlan, out: str | Path, address: str | None = None, max_concurrency: int | None = None,
              quiet: bool = False, retry_failed: bool = False, in_process: bool = False, existing: str = "refuse",
              mix_code: bool = False, compact: str | None = None) -> SweepSummary:
    """Run the plan's missing points into ``out``; ``in_process`` runs them here, one by one, without Ray.

    A sweep of the same name already in ``out`` is continued only if it was run from the same
    spec version and the same code; ``existing`` = "add" adds this spec version's points to it,
    "replace" deletes it first; ``mix_code`` lets points from different code share the dataset.
    When the run finishes, its tables are compacted as ``compact`` says (auto, always, never;
    None: the spec's ``compact``). One process at a time runs or compacts a sweep (lock.py)."""
    if existing not in EXISTING:
        raise UserError(f"existing = {existing!r}: one of {', '.join(EXISTING)}")
    if max_concurrency is not None and max_concurrency < 1:
        raise UserError(f"max_concurrency = {max_concurrency}: must be at least 1")
    io.check_dir(out, "out")  # before Ray starts: a bad directory costs a second
    layout = DatasetLayout(Path(out), plan.spec.name, plan.spec.partition_by, plan.command.result)
    when = compact or plan.spec.compact
    if when not in compaction.CHOICES:
        raise UserError(f"compact must be one of {', '.join(compaction.CHOICES)}, got {when!r}")
    with sweep_lock(layout, "running"):
        compaction.finish(layout)  # a compaction killed half-way: its rows are held in staged files
        summary = _run(plan, layout, address, max_concurrency, quiet, retry_failed, in_process, existing, mix_code)
        if when != "never" and (when == "always" or compaction.point_file_count(layout) >= compaction.AUTO_FILES):
            done = compaction.compact_layout(layout, plan.spec.compact_rows)
            if not quiet:
                print(done.describe(), file=sys.stderr, flush=True)
            summary = replace(summary, compaction=done, seconds=summary.seconds + done.seconds)
    return summary


def _run(plan: SweepPlan, layout: DatasetLayout, address: str | None, max_concurrency: int | None, quiet: bool,
         retry_failed: bool, in_process: bool, existing: str, mix_code: bool) -> SweepSummary:
    start = time.perf_counter()
    resumed = resume(plan, layout, existing, mix_code, retry_failed)
    plan = resumed.plan  # as the directory knows it: points stored under earlier ids keep them (known.py)
    store = Store(plan, layout)
    todo, manifest = shared_anchors(resumed.todo, plan.spec.step_cache, layout.root), resumed.manifest
    # Ray first: a run that cannot reach its cluster never starts, so it leaves the manifest as it was
    ray = None if in_process or not todo else _ray(address)
    compaction.release(layout, resumed.released)  # to be rerun: out of its compacted file
    code = code_version()
    run = RunEntry(now(), socket.gethostname(), os.getpid(), address, code.version,
                   to_run=len(todo), skipped=len(plan.points) - len(todo), spec_hash=plan.spec_hash,
                   code=code.to_json(), code_label=code.label)
    manifest.runs.append(run)
    manifest.save(layout.manifest)
    log = (lambda msg: None) if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    log(f"sweep {plan.spec.name}: {len(plan.points)} points, {run.skipped} already stored, {len(todo)} to run"
        + (f" ({plan.duplicates} duplicate combinations dropped)" if plan.duplicates else ""))
    for line in plan.notes:
        log(line)
    for f in resumed.unreadable:
        log(f"{f}: cannot be read (not a whole Parquet file): its point is recomputed")
    try:
        if todo:
            _execute(plan, todo, store, manifest, run, layout, ray,
                     max_concurrency or plan.spec.max_concurrency, quiet, log)
        run.state = "finished"
    except BaseException:
        run.state, run.ended = "interrupted", now()
        with contextlib.suppress(WriteError):  # a full disk: the error that stopped the run is the one to tell
            manifest.save(layout.manifest)
        raise
    run.ended = now()
    manifest.save(layout.manifest)
    counts = manifest.counts()
    found = read_outcomes(layout.table_dir(), {pid: entry.index for pid, entry in manifest.points.items()})
    return SweepSummary(plan.spec.name, layout.dataset, layout.manifest, len(plan.points), run.skipped,
                        run.computed, counts[FAILED], time.perf_counter() - start, found)


def shared_anchors(points: list[Point], step_cache: str, root: Path) -> list[Point]:
    """The points, each serve point that names no step cache given the sweep's ``step_cache`` (a relative
    directory under the results directory ``root``). The id stays the point's: where its anchors come
    from changes how it is computed, not what (sim/workloads/serve/cache.py)."""
    if not step_cache:
        return points
    where = str(Path(step_cache) if Path(step_cache).is_absolute() else Path(root).resolve() / step_cache)
    out = []
    for p in points:
        workload = p.config.get("workload") or {}
        decode = workload.get("decode")
        if workload_reads(workload.get("kind"), "decode", "step_cache") and isinstance(decode, dict) \
                and not decode.get("step_cache"):
            p = replace(p, config={**p.config, "workload": {**workload, "decode": {**decode, "step_cache": where}}})
        out.append(p)
    return out


def _ray(address):
    from cluster.parallel.ray_env import init_ray

    return init_ray(address)


def _execute(plan, todo, store: Store, manifest: Manifest, run: RunEntry, layout: DatasetLayout, ray,
             max_concurrency, quiet, log) -> None:
    """The points of ``todo`` on the Ray of ``ray`` (None: here, one by one)."""
    from cluster.sweep.execute import Executor, InProcessExecutor  # here: a sweep with nothing to run never needs it

    executor: Executor | InProcessExecutor
    if ray is None:
        executor = InProcessExecutor(plan.command.name)
    else:
        executor = Executor(ray, plan.command.name, plan.spec.max_retries, max_concurrency, batching=True)
    eta = WorkEta(1 if ray is None else int(ray.cluster_resources().get("CPU", 1)) or 1,  # from the points' costs
                  unit_seconds=1.0, start_up=0.0 if ray is None else START_UP_SECONDS)  # priors in seconds
    for p in todo:
        eta.add(p.id, features(p.values), prior(plan.command.name, p.config))
    progress = Progress(f"sweep {plan.spec.name}", quiet, eta=eta.remaining)
    saved_at, save_every = time.monotonic(), MANIFEST_EVERY_SECONDS

    def tick():
        nonlocal saved_at, save_every
        if run.computed < len(todo):  # done() prints the last
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
        eta.finished(point.id, point_run.seconds)
        if point_run.status != STATUS_OK:
            run.failed += 1
            log(f"{_describe(point)} failed: {point_run.error}")
        progress(run.computed, len(todo), unit="points")
        tick()

    progress(0, len(todo), unit="points", now_too=True)  # at once: how long the sweep will take, predicted
    try:
        executor.run(todo, done, tick, lambda p: eta.started(p.id))
    finally:
        progress.close()


def _describe(point: Point) -> str:
    shown = ", ".join(f"{k}={v!r}" for k, v in point.values.items())
    return f"point {point.index} ({shown})" if shown else f"point {point.index}"
