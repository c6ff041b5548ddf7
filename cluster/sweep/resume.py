"""Resuming a sweep: what its files already hold, which points are left to run, and the manifest of this run.

Resuming is the normal case: the points whose valid result file exists are skipped (a
rerun after a killed driver computes only what is missing), and ``retry_failed`` also
reruns the points stored as errors. A sweep of the same name is continued only if it was
run from the same spec version and the same code, unless told to add to it or replace it.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from cluster.errors import UserError
from cluster.results import io, schemas
from cluster.sweep.index import holdings, stored_specs
from cluster.sweep.known import Stored, as_stored
from cluster.sweep.layout import DatasetLayout
from cluster.sweep.manifest import DONE, FAILED, FORMAT, PENDING, Manifest, PointEntry, now
from cluster.sweep.plan import AxisColumns, SweepPlan
from cluster.sweep.points import Point
from cluster.sweep.records import STATUS_OK, Store
from cluster.version import code_version

ORPHAN_AGE_SECONDS = 300.0  # a temporary file lives for the milliseconds of one write


@dataclass(frozen=True)
class Resumed:
    """Where a sweep stands before a run: the plan as the directory knows it (known.py: points stored under
    earlier ids keep them), the points to run (in the order they run) and the manifest that records the run;
    ``released``: the points to run that sit in compacted files, which must leave them first (compact.release)."""

    plan: SweepPlan
    todo: list[Point]
    released: set[str]
    manifest: Manifest
    unreadable: list[Path] = field(default_factory=list)  # point files that cannot be read: recomputed


def resume(plan: SweepPlan, layout: DatasetLayout, existing: str, mix_code: bool, retry_failed: bool) -> Resumed:
    """Check that the sweep in ``layout`` may be continued, clear what a killed writer left, and find what is
    left to run. Changes nothing else on disk (but ``existing`` = "replace" deletes the sweep)."""
    if existing == "replace":
        _remove(layout)
    old = _stored_manifest(plan, layout)
    remove_orphans(layout)
    held = holdings(layout.table_dir())
    specs = old.spec_hashes() if old else sorted(stored_specs(layout.table_dir()))
    plan = as_stored(plan, Stored(held.status.keys() | (old.points.keys() if old else set()), specs, old))
    _check_continuable(plan, layout, old, specs, existing, mix_code)
    store = Store(plan, layout)
    stored = {p.id: held.status[p.id] for p in plan.points if p.id in held.status}
    todo = interleaved([p for p in plan.points if p.id not in stored or (retry_failed and stored[p.id] != STATUS_OK)])
    manifest = Manifest(
        sweep=plan.spec.name, command=plan.spec.command, description=plan.spec.description, spec=plan.spec.raw,
        spec_path=str(plan.spec.source), partition_by=list(plan.spec.partition_by),
        columns={f.name: str(f.type) for f in plan.axes.fields},
        created=old.created if old else now(), runs=old.runs if old else [],
        specs=list(old.specs) if old else [], result_table=layout.result,
        column_docs=column_docs(layout.result, plan.axes),
    )
    version = {"hash": plan.spec_hash, "text": plan.spec.text, "base": plan.spec.base, "source": str(plan.spec.source)}
    if plan.spec_hash not in manifest.spec_hashes():
        manifest.specs.append({**version, "added": now()})
    for known in manifest.specs:  # a manifest rebuilt from the files (rebuild.py) knows a version by its hash only
        if known["hash"] == plan.spec_hash and known.get("text") is None:
            known.update(version)
    if old:  # points of earlier spec versions stay listed (--add): they belong to the sweep
        manifest.points.update(old.points)
    for p in plan.points:
        manifest.points[p.id] = _entry(p, store, stored.get(p.id), old.points.get(p.id) if old else None,
                                       plan.spec_hash)
    return Resumed(plan, todo, {p.id for p in todo if p.id in held.compacted}, manifest, held.unreadable)


def _entry(point: Point, store: Store, stored: str | None, prev: PointEntry | None, spec_hash: str) -> PointEntry:
    """A point's manifest entry from its stored status (None: not stored) and its entry in the stored manifest."""
    status = {STATUS_OK: DONE, None: PENDING}.get(stored, FAILED)
    specs = list(prev.specs) if prev else []
    return PointEntry(point.index, point.values, str(store.path(point).relative_to(store.layout.root)), status,
                      prev.attempts if prev else 0, prev.seconds if prev and status != PENDING else None,
                      prev.error if prev and status == FAILED else None,
                      specs + [spec_hash] * (spec_hash not in specs))


def _stored_manifest(plan: SweepPlan, layout: DatasetLayout) -> Manifest | None:
    """The stored manifest of this sweep (None: none), refused if an older rdasim wrote it in an older layout."""
    old = Manifest.load(layout.manifest) if layout.manifest.is_file() else None
    if (layout.legacy_manifest.is_file() and old is None) or (old is not None and old.format < FORMAT):
        raise UserError(f"sweep {plan.spec.name!r} in {str(layout.root)!r} was written by an older rdasim, in an "
                        f"older layout ({(layout.manifest if old else layout.legacy_manifest).name}); rerun with "
                        "--replace to start it again, or use another --out or [sweep] name")
    return old


def _check_continuable(plan: SweepPlan, layout: DatasetLayout, old: Manifest | None, specs: list[str],
                       existing: str, mix_code: bool) -> None:
    """Refuse to continue a sweep stored from another spec version (``specs``: those the directory knows)
    or other code, unless told to add to it."""
    name, root = plan.spec.name, layout.root
    if old is None:
        others = [h for h in specs if h != plan.spec_hash]  # the manifest lost: the files say
        if others and existing != "add":
            raise UserError(
                f"sweep {name!r} in {str(root)!r} has no manifest but holds points of another spec version "
                f"({', '.join(others)}; this spec is {plan.spec_hash}): rerun with --add to add this version's "
                "points to it, --replace to delete them and start again, or give the sweep a new [sweep] name")
        return
    if plan.spec_hash not in specs and existing != "add":
        when = old.specs[-1]["added"] if old.specs else old.created
        raise UserError(
            f"sweep {name!r} in {str(root)!r} holds points of another spec version ({specs[-1:] or '?'} "
            f"from {when}; this spec is {plan.spec_hash}): rerun with --add to add this version's points to it "
            "(the sweep_spec column says which version computed each point), --replace to delete its points and "
            "start again, or give the sweep a new [sweep] name")
    here, stored = code_version().label, old.code_labels()
    if stored and stored != [here] and not mix_code:
        raise UserError(
            f"sweep {name!r} in {str(root)!r} was computed by rdasim {', '.join(stored)}; this is {here}: rerun "
            "with --mix-code to add points from this code (the rdasim_commit and rdasim_dirty columns say which "
            "code computed each point), or use another --out or [sweep] name")


def _remove(layout: DatasetLayout) -> None:
    """Delete a sweep's own files: its tables (in this layout and older ones) and manifests (nothing else in DIR)."""
    for d in [layout.dataset, *replace(layout, format=FORMAT - 1).table_dirs().values()]:
        if d.is_dir():
            shutil.rmtree(d)
    for m in (layout.manifest, layout.legacy_manifest):
        m.unlink(missing_ok=True)


def remove_orphans(layout: DatasetLayout, at: float | None = None) -> int:
    """Delete temporary files that a killed writer left behind: its process is gone (a writer on this
    host), or the file is old enough for it to be dead (on another host). Returns how many."""
    at = time.time() if at is None else at
    removed = 0
    if layout.dataset.is_dir():
        for tmp in layout.dataset.rglob(".*.tmp"):
            try:
                if io.writer_gone(tmp) or at - tmp.stat().st_mtime > ORPHAN_AGE_SECONDS:
                    tmp.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
    return removed


def column_docs(result: str, axes: AxisColumns) -> dict[str, str]:
    """What each column of the sweep's result table means: kept once, in the manifest, not in every file."""
    table = next((t for t in schemas.ALL_TABLES if t.name == result), None)
    job = list(table.columns) + schemas.META_COLUMNS if table is not None else []
    return {**{c.name: c.doc for c in schemas.SWEEP_COLUMNS},
            **{f.name: f"the point's value of the swept config key {p}" for p, f in zip(axes.paths, axes.fields)},
            **{c.name: c.doc for c in job}}


def interleaved(points: list[Point]) -> list[Point]:
    """The points in bit-reversal order of their place (0, n/2, n/4, 3n/4, ...): the first ones done sample
    every value of every axis, so the ETA learns each value's cost early and an interrupted sweep has
    covered its whole space coarsely, not its first corner finely."""
    bits = max(1, (len(points) - 1).bit_length())
    return [points[i] for i in sorted(range(len(points)), key=lambda i: int(f"{i:0{bits}b}"[::-1], 2))]
