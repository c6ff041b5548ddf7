"""Running a sweep: skip what is stored, run the rest on Ray, store each point as it finishes.

Resuming is the normal case: the points whose valid result file exists are skipped (a
rerun after a killed driver computes only what is missing), the others go to Ray, and
the manifest records the run. ``retry_failed`` also reruns the points stored as errors.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from cluster.errors import UserError, WriteError
from cluster.progress import Progress, WorkEta
from cluster.results import io
from cluster.sweep import compact as compaction
from cluster.sweep.cost import features, prior
from cluster.sweep.index import holdings, stored_specs
from cluster.sweep.layout import DatasetLayout
from cluster.sweep.lock import sweep_lock
from cluster.sweep.manifest import DONE, FAILED, FORMAT, PENDING, Manifest, PointEntry, RunEntry, now
from cluster.sweep.outcomes import Outcomes, read_outcomes
from cluster.sweep.plan import SweepPlan, notes
from cluster.sweep.points import Point
from cluster.sweep.records import STATUS_OK, PointRun, column_docs
from cluster.sweep.store import Store
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


def _version(plan: SweepPlan) -> dict:
    spec = plan.spec
    return {"hash": plan.spec_hash, "text": spec.text, "base": spec.base, "source": str(spec.source), "added": now()}


def _previous(plan: SweepPlan, layout: DatasetLayout, existing: str, mix_code: bool) -> Manifest | None:
    """The stored manifest of this sweep, after checking it may be continued; None to start afresh."""
    name, root = plan.spec.name, layout.root
    if existing == "replace":
        _remove(layout)
        return None
    old = Manifest.load(layout.manifest) if layout.manifest.is_file() else None
    if (layout.legacy_manifest.is_file() and old is None) or (old is not None and old.format < FORMAT):
        raise UserError(f"sweep {name!r} in {str(root)!r} was written by an older rdasim, in an older layout "
                        f"({(layout.manifest if old else layout.legacy_manifest).name}); rerun with --replace to "
                        "start it again, or use another --out or [sweep] name")
    if old is None:
        others = sorted(stored_specs(layout.table_dir()) - {plan.spec_hash})  # the manifest lost: the files say
        if others and existing != "add":
            raise UserError(
                f"sweep {name!r} in {str(root)!r} has no manifest but holds points of another spec version "
                f"({', '.join(others)}; this spec is {plan.spec_hash}): rerun with --add to add this version's "
                "points to it, --replace to delete them and start again, or give the sweep a new [sweep] name")
        return None
    if plan.spec_hash not in old.spec_hashes() and existing != "add":
        when = old.specs[-1]["added"] if old.specs else old.created
        raise UserError(
            f"sweep {name!r} in {str(root)!r} holds points of another spec version ({old.spec_hashes()[-1:] or '?'} "
            f"from {when}; this spec is {plan.spec_hash}): rerun with --add to add this version's points to it "
            "(the sweep_spec column says which version computed each point), --replace to delete its points and "
            "start again, or give the sweep a new [sweep] name")
    here, stored = code_version().label, old.code_labels()
    if stored and stored != [here] and not mix_code:
        raise UserError(
            f"sweep {name!r} in {str(root)!r} was computed by rdasim {', '.join(stored)}; this is {here}: rerun "
            "with --mix-code to add points from this code (the rdasim_commit and rdasim_dirty columns say which "
            "code computed each point), or use another --out or [sweep] name")
    return old


def _remove(layout: DatasetLayout) -> None:
    """Delete a sweep's own files: its tables (in this layout and older ones) and manifests (nothing else in DIR)."""
    for d in [layout.dataset, *replace(layout, format=FORMAT - 1).table_dirs().values()]:
        if d.is_dir():
            shutil.rmtree(d)
    for m in (layout.manifest, layout.legacy_manifest):
        m.unlink(missing_ok=True)


def _manifest(plan: SweepPlan, layout: DatasetLayout, store: Store, stored: dict[str, str],
              old: Manifest | None) -> Manifest:
    spec = plan.spec
    m = Manifest(
        sweep=spec.name, command=spec.command, description=spec.description, spec=spec.raw,
        spec_path=str(spec.source), partition_by=list(spec.partition_by),
        columns={f.name: str(f.type) for f in plan.axes.fields},
        created=old.created if old else now(), runs=old.runs if old else [],
        specs=list(old.specs) if old else [], result_table=layout.result,
        column_docs=column_docs(layout.result, plan.axes),
    )
    if plan.spec_hash not in m.spec_hashes():
        m.specs.append(_version(plan))
    if old:  # points of earlier spec versions stay listed (--add): they belong to the sweep
        m.points.update(old.points)
    for p in plan.points:
        prev = old.points.get(p.id) if old else None
        status = {STATUS_OK: DONE, None: PENDING}.get(stored.get(p.id), FAILED)
        specs = list(prev.specs) if prev else []
        m.points[p.id] = PointEntry(
            p.index, p.values, str(store.path(p).relative_to(layout.root)), status,
            prev.attempts if prev else 0, prev.seconds if prev and status != PENDING else None,
            prev.error if prev and status == FAILED else None, specs + [plan.spec_hash] * (plan.spec_hash not in specs))
    return m


def interleaved(points: list[Point]) -> list[Point]:
    """The points in bit-reversal order of their place (0, n/2, n/4, 3n/4, ...): the first ones done sample
    every value of every axis, so the ETA learns each value's cost early and an interrupted sweep has
    covered its whole space coarsely, not its first corner finely."""
    bits = max(1, (len(points) - 1).bit_length())
    return [points[i] for i in sorted(range(len(points)), key=lambda i: int(f"{i:0{bits}b}"[::-1], 2))]


def _describe(point: Point) -> str:
    shown = ", ".join(f"{k}={v!r}" for k, v in point.values.items())
    return f"point {point.index} ({shown})" if shown else f"point {point.index}"


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
    old = _previous(plan, layout, existing, mix_code)
    store = Store(plan, layout)
    store.remove_orphans()
    held = holdings(layout.table_dir())
    stored = {p.id: held.status[p.id] for p in plan.points if p.id in held.status}
    todo = [p for p in plan.points if p.id not in stored or (retry_failed and stored[p.id] != STATUS_OK)]
    # Ray first: a run that cannot reach its cluster never starts, so it leaves the manifest as it was
    ray = None if in_process or not todo else _ray(address)
    compaction.release(layout, {p.id for p in todo if p.id in held.compacted})  # to be rerun: out of its file
    manifest = _manifest(plan, layout, store, stored, old)
    code = code_version()
    run = RunEntry(now(), socket.gethostname(), os.getpid(), address, code.version,
                   to_run=len(todo), skipped=len(plan.points) - len(todo), spec_hash=plan.spec_hash,
                   code=code.to_json(), code_label=code.label)
    manifest.runs.append(run)
    manifest.save(layout.manifest)
    log = (lambda msg: None) if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    log(f"sweep {plan.spec.name}: {len(plan.points)} points, {run.skipped} already stored, {len(todo)} to run"
        + (f" ({plan.duplicates} duplicate combinations dropped)" if plan.duplicates else ""))
    for line in notes(plan):
        log(line)
    for f in held.unreadable:
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


def _ray(address):
    from cluster.parallel.ray_env import init_ray

    return init_ray(address)


def _execute(plan, todo, store: Store, manifest: Manifest, run: RunEntry, layout: DatasetLayout, ray,
             max_concurrency, quiet, log) -> None:
    """The points of ``todo`` on the Ray of ``ray`` (None: here, one by one)."""
    from cluster.sweep.execute import Executor, InProcessExecutor

    executor: Executor | InProcessExecutor
    if ray is None:
        executor = InProcessExecutor(plan.command.name)
    else:
        executor = Executor(ray, plan.command.name, plan.spec.max_retries, max_concurrency, batching=True)
    eta = WorkEta(1 if ray is None else int(ray.cluster_resources().get("CPU", 1)) or 1)  # from the points' costs
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

    try:
        executor.run(interleaved(todo), done, tick, lambda p: eta.started(p.id))
    finally:
        progress.close()
