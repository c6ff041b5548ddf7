"""Finding the result tables under a directory: runs (``rdasim noc/run/map --out``) and sweeps.

A results tree may hold many of both: ``results/noc`` and ``results/kv`` from two runs,
and the sweeps of a ``rdasim sweep --out results``. A run's directory holds one dataset
per table (cluster/results/layout.py; older runs: ``<table>.parquet`` files); the runs
added to one directory (``--add``) are told apart by their ``run_id``. A sweep is found
by its manifest and read with all its tables, in the layout it was written in.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cluster.results.layout import open_files, table_names
from cluster.sweep.dataset import read_dataset
from cluster.sweep.layout import (
    MANIFEST_SUFFIX,
    column_name,
    dataset_files,
    find_manifests,
    is_compacted,
    of_manifest,
    point_of,
)
from cluster.sweep.manifest import Manifest
from cluster.sweep.reading import reader_view, staged_of
from cluster.sweep.rebuild import restore
from cluster.sweep.spec import flatten


@dataclass
class SweepTables:
    name: str
    command: str
    axes: list[str]  # swept columns
    result: pa.Table  # the points' result rows (errors included)
    tables: dict[str, pa.Table] = field(default_factory=dict)  # its other tables by name, when read whole
    orders: dict[str, list] = field(default_factory=dict)  # swept column -> its values in the spec's order
    dirs: dict[str, Path] = field(default_factory=dict)  # its other tables' datasets, read a point at a time
    explore: bool = False  # the trials of an exploration (rdasim explore --out), not a sweep of its own

    def point_tables(self, point: str) -> dict[str, pa.Table]:
        """Every table's rows of one point: from ``tables``, else from ``dirs``: the point's own file
        (<point>.<table>.parquet), or its rows in the compacted files (a sweep of 1,000 points and more)."""
        out = {n: t.filter(pc.equal(t["point_id"], point)) for n, t in self.tables.items()
               if "point_id" in t.column_names}
        for name, d in self.dirs.items():
            if name in out:
                continue
            view = reader_view(dataset_files(d), staged_of(d))  # a compaction half done: its staged file stands in
            own = [f for f in view.files if not is_compacted(f) and f not in view.staged and point_of(f) == point]
            if own:
                out[name] = open_files(own).to_table()
            elif compacted := [f for f in view.files if is_compacted(f) or f in view.staged]:
                rows = open_files(compacted).to_table(filter=pc.field("point_id") == point)
                if rows.num_rows:
                    out[name] = rows
        return out


@dataclass
class RunTables:
    """One run's tables; ``label`` names its figures ('' for a lone run in the report's directory)."""

    label: str
    where: str  # the run, as the figures' titles name it: its directory and run id
    tables: dict[str, pa.Table] = field(default_factory=dict)


@dataclass
class Sources:
    runs: list[RunTables] = field(default_factory=list)
    sweeps: list[SweepTables] = field(default_factory=list)

    def empty(self) -> bool:
        return not self.runs and not self.sweeps


def table_name(path: Path) -> str:
    meta = pq.read_schema(path).metadata or {}
    return meta.get(b"table", path.stem.encode()).decode()


def _sweep(manifest_path: Path) -> SweepTables | None:
    m = Manifest.load(manifest_path)
    layout = of_manifest(manifest_path)
    dirs = layout.table_dirs()
    if layout.result not in dirs:
        return None
    result = read_dataset(dirs.pop(layout.result))  # the other tables are read a point at a time, when drawn
    axes = flatten(m.spec.get("axes") or {}) if isinstance(m.spec.get("axes"), dict) else {}
    orders = {column_name(path): values for path, values in axes.items() if isinstance(values, list)}
    return SweepTables(m.sweep, m.command, list(m.columns), result, {}, orders, dirs, "explore" in m.spec)


def _run_tables(d: Path) -> dict[str, pa.Table]:
    """The tables of the runs in directory ``d``: its table datasets and (older runs) ``*.parquet`` files."""
    out: dict[str, list[pa.Table]] = {}
    for name in table_names():
        if (d / name).is_dir():
            files = sorted(f for f in (d / name).rglob("*.parquet") if not f.name.startswith((".", "_")))
            if files:
                out.setdefault(name, []).append(open_files(files).to_table())
    known = set(table_names())
    for f in sorted(d.glob("*.parquet")):
        name = table_name(f)
        if name in known:  # not an exploration's pareto.parquet or base.parquet, which are not a run's tables
            out.setdefault(name, []).append(pq.read_table(f))
    return {n: pa.concat_tables(ts, promote_options="permissive") for n, ts in out.items()}


def _by_run(label: str, where: str, tables: dict[str, pa.Table]) -> list[RunTables]:
    """One RunTables per run id (runs added to one directory), or the whole set when rows carry none."""
    ids: list[str] = []
    for t in tables.values():
        if "run_id" in t.column_names:
            ids += [i for i in pc.unique(t["run_id"]).to_pylist() if i is not None and i not in ids]
    if len(ids) < 2:
        return [RunTables(label, where + (f", run {ids[0]}" if ids else ""), tables)]
    return [RunTables(f"{label}-{i}" if label else i, f"{where}, run {i}",
                      {n: t.filter(pc.equal(t["run_id"], i)) for n, t in tables.items() if "run_id" in t.column_names})
            for i in sorted(ids)]


def _sweep_dirs(manifests: list[Path]) -> set[Path]:
    """Directories that belong to sweeps (their tables), not to runs."""
    out = set()
    for m in manifests:
        layout = of_manifest(m)
        out.add(layout.dataset.resolve())
        out.update(d.resolve() for d in layout.table_dirs().values())
    return out


def discover(path: str | Path) -> Sources:
    """Every run and sweep under ``path`` (an --out directory, a sweep's directory, or a tree of them)."""
    root = Path(path)
    for name, said in restore(root).items():  # a sweep whose manifest was lost: rebuilt from its files
        print(f"rdasim: warning: sweep {name!r}: {said}", file=sys.stderr)
    manifests = [m.resolve() for m in find_manifests(root)]
    skip = _sweep_dirs(manifests)
    tables = set(table_names())
    out = Sources()
    for d, subdirs, _files in ([] if not root.is_dir() else os.walk(root)):  # top-down: sweeps found before their dirs
        here = Path(d)
        found = [m.resolve() for m in sorted(here.glob(f"*{MANIFEST_SUFFIX}")) if m.resolve() not in manifests]
        manifests += found
        skip |= _sweep_dirs(found)
        subdirs[:] = sorted(s for s in subdirs if s not in tables and not s.startswith(("_", ".")) and "=" not in s
                            and (here / s).resolve() not in skip)
        if here.resolve() in skip:
            subdirs[:] = []
            continue
        runs = _run_tables(here)
        if runs:
            rel = here.relative_to(root)
            out.runs += _by_run("" if rel == Path(".") else str(rel).replace(os.sep, "-"), str(here), runs)
    out.sweeps = [s for m in manifests if (s := _sweep(m)) is not None]
    return out
