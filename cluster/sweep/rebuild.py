"""A lost manifest rebuilt from the stored files, so that ``status`` counts and ``report`` draws what is stored.

The files are the truth (manifest.py): every result row names its point, its index, its
status, its attempts and the spec version that computed it (``sweep_spec``), and carries the
swept columns. What they do not hold is the spec itself, so the rebuilt manifest lists the
stored points only (none pending: the points never stored are unknown until the spec is
run again) and its spec versions by hash, without their text; its one run has the state
``rebuilt``. Rerunning the spec restores the rest, and the spec check holds (resume.py): a
rerun of another spec version is refused as it is when the manifest is there.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from cluster.errors import UserError
from cluster.results import schemas
from cluster.sweep.commands import COMMANDS
from cluster.sweep.index import read_file
from cluster.sweep.layout import MANIFEST_SUFFIX, SIDE, DatasetLayout, dataset_files, is_compacted, point_of
from cluster.sweep.lock import sweep_lock
from cluster.sweep.manifest import DONE, FAILED, Manifest, PointEntry, RunEntry
from cluster.sweep.reading import reader_view, staged_of
from cluster.sweep.records import STATUS_OK

REBUILT = "rebuilt"  # the state of a rebuilt manifest's one run
_SWEEP = [c.name for c in schemas.SWEEP_COLUMNS]


def lost_sweeps(path: Path) -> list[DatasetLayout]:
    """The sweeps at ``path`` (an --out directory, or one sweep's directory) whose tables are stored but
    whose manifest is gone."""
    path = Path(path)
    candidates = [path] + (sorted(d for d in path.iterdir() if d.is_dir()) if path.is_dir() else [])
    out = []
    for d in candidates:
        if d.name.startswith((SIDE, ".")) or "=" in d.name:
            continue
        if any((d.parent / f"{prefix}{d.name}{MANIFEST_SUFFIX}").exists() for prefix in (SIDE, "")):
            continue
        result = next((c.result for c in COMMANDS.values() if (d / c.result / f"sweep_id={d.name}").is_dir()), None)
        if result is not None and dataset_files(d / result):
            out.append(DatasetLayout(d.parent, d.name, result=result))
    return out


def rebuilt_manifest(layout: DatasetLayout) -> Manifest:
    """The manifest of the sweep at ``layout`` as its stored result rows tell it (a file that cannot be
    read holds no point: status lists it, a rerun recomputes it)."""
    d = layout.table_dir()
    files = reader_view(dataset_files(d), staged_of(d)).files
    tables = [t for f in files if (t := _readable(f)) is not None]
    where = {point_of(f): str(f.relative_to(layout.root)) for f in files if not is_compacted(f)}
    held = str(d.relative_to(layout.root))  # a point in a compacted file: its table's directory
    table = pa.concat_tables(tables, promote_options="default")
    command = next(c for c in COMMANDS.values() if c.result == layout.result)
    known = set(_SWEEP) | set((command.result_schema() or pa.schema([])).names)
    axes = [f for f in table.schema if f.name not in known]  # between the sweep's columns and the job's
    rows = table.select(_SWEEP + [f.name for f in axes]).to_pylist()
    points: dict[str, PointEntry] = {}
    for r in sorted(rows, key=lambda r: r["point_index"]):
        points.setdefault(r["point_id"], PointEntry(
            r["point_index"], {f.name: r[f.name] for f in axes}, where.get(r["point_id"], held),
            DONE if r["point_status"] == STATUS_OK else FAILED, r["point_attempts"] or 0, r["point_seconds"],
            r["point_error"], [r["sweep_spec"]] if r["sweep_spec"] else []))
    hashes = sorted({h for p in points.values() for h in p.specs})
    start, end = _span(layout)
    values = {f.name: sorted({p.values[f.name] for p in points.values()} - {None}, key=str) for f in axes}
    failed = sum(p.status == FAILED for p in points.values())
    run = RunEntry(start, "", 0, None, "", computed=len(points), failed=failed, ended=end, state=REBUILT,
                   spec_hash=hashes[-1] if hashes else "")
    return Manifest(layout.name, command.name, "rebuilt from the stored files: the manifest was lost",
                    {"sweep": {"name": layout.name, "command": command.name}, "axes": values}, "", [],
                    {f.name: str(f.type) for f in axes}, start, [run], points, specs=[
                        {"hash": h, "text": None, "base": {}, "source": "", "added": start} for h in hashes],
                    result_table=layout.result)


def restore(path: Path) -> dict[str, str]:
    """Rebuild and save the manifest of every sweep at ``path`` that lost its own (under its lock; a sweep
    another process holds is left to it). Returns what was done, a line per sweep name, for the caller to say."""
    said = {}
    for layout in lost_sweeps(path):
        with ExitStack() as held:
            try:
                held.enter_context(sweep_lock(layout, "rebuilding the manifest of"))
            except UserError:  # busy: the process running it writes its own manifest
                continue
            if layout.manifest.exists():
                continue
            m = rebuilt_manifest(layout)
            m.save(layout.manifest)
        said[layout.name] = (f"its manifest was lost: rebuilt {layout.manifest.name} from the {len(m.points)} "
                             "stored points (run the spec again to list the points never stored)")
    return said


def _readable(f: Path) -> pa.Table | None:
    try:
        return read_file(f)
    except UserError:
        return None


def _span(layout: DatasetLayout) -> tuple[str, str]:
    """When the stored files were written: the first and the last (ISO 8601, UTC)."""
    times = [os.stat(f).st_mtime for f in dataset_files(layout.table_dir())]
    iso = [datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds") for t in (min(times), max(times))]
    return iso[0], iso[1]
