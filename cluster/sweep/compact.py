"""Compaction: a sweep table's point files rewritten into files of up to 10^5 rows, each row kept once.

A sweep stores one file per point (atomic, at a fixed path: what makes its resume exactly
once), so 10^5 points are 10^5 files for every reader to open. Compaction rewrites the point
files of each partition directory into ``compact-<id>.<table>.parquet`` files beside them (a
point's rows never split between two), and merges compacted files smaller than the target.

Each step can be killed:

1. the new file is written in full under a hidden name (``.compact-<id>.<table>.parquet.staged``,
   itself through a temporary name and a rename), its footer listing the compacted files it
   replaces; until it exists, nothing else has changed;
2. the files it replaces are deleted: the point files of the points in its rows, and the
   compacted files its footer lists;
3. it is renamed into place.

Once staged, the file is the record of what to finish: the next compaction, run or status of the
sweep does 2 and 3 for it (``finish``) before anything else. No reader ever sees a row
twice; while 2 and 3 run (seconds, for a file replacing 10^5 others) a reader misses the
points being moved, which the staged file holds. Only points whose result is stored are
compacted: a point killed while its tables were being stored has other tables' files but no
result file, and its rerun rewrites them in place. A point that is run again
(``--retry-failed``) first leaves its compacted file (``release``), result table last.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cluster.errors import UserError
from cluster.results.writer import TableForm, write_table
from cluster.sweep.index import THREADS, point_ids, read_file, staged_files
from cluster.sweep.layout import (
    COMPACTED,
    DatasetLayout,
    dataset_files,
    final_path,
    find_manifests,
    is_compacted,
    of_manifest,
    point_of,
    staged_path,
)
from cluster.sweep.lock import sweep_lock
from cluster.sweep.reading import REPLACES
from cluster.sweep.records import UNBOUNDED_TEXT

ROWS = 100_000  # rows of a compacted file: one footer for a sweep's worth of points, read in milliseconds
AUTO_FILES = 1_000  # compact = "auto": compact a table when a run leaves it at least this many point files
CHOICES = ("auto", "always", "never")
WINDOW = 1024  # point files read before their rows are gathered into one table (bounds the driver's memory)
POINT_KEYS = (b"rdasim.point_id", b"rdasim.point_status", b"rdasim.spec_hash", b"rdasim.config_hash",
              b"rdasim.config", b"rdasim.spec")  # one point's footer keys: not a compacted file's


@dataclass
class TableCompaction:
    """What compacting one table did."""

    table: str
    point_files: int = 0  # point files replaced
    merged: int = 0  # smaller compacted files replaced
    written: int = 0  # compacted files written
    rows: int = 0  # rows in the files written
    bytes_before: int = 0  # of the files replaced
    bytes_after: int = 0  # of the files written


@dataclass
class Compaction:
    """What compacting one sweep did."""

    sweep: str
    tables: list[TableCompaction] = field(default_factory=list)
    finished: int = 0  # interrupted compactions finished first
    seconds: float = 0.0

    @property
    def replaced(self) -> int:
        return sum(t.point_files + t.merged for t in self.tables)

    @property
    def written(self) -> int:
        return sum(t.written for t in self.tables)

    def to_json(self) -> dict:
        return {"sweep": self.sweep, "replaced": self.replaced, "written": self.written, "finished": self.finished,
                "seconds": round(self.seconds, 3), "tables": [asdict(t) for t in self.tables]}

    def describe(self) -> str:
        first = f"finished {self.finished} interrupted compaction file(s), then " if self.finished else ""
        if not self.replaced:
            return f"{self.sweep}: {first}nothing to compact"
        parts = [f"{t.table} {t.point_files + t.merged} -> {t.written}" for t in self.tables if t.written]
        return (f"{self.sweep}: {first}compacted {self.replaced} files into {self.written} ({', '.join(parts)}) "
                f"in {self.seconds:.1f} s")


# ----------------------------------------------------------------------------- finishing a killed one
def finish(layout: DatasetLayout) -> int:
    """Put in place every staged compacted file (steps 2 and 3 of a compaction that was killed); returns how many."""
    done = 0
    for d in layout.table_dirs().values():
        for staged in staged_files(d):
            _put_in_place(staged, [pid for pid, _ in point_ids(staged)], _replaced(staged))
            done += 1
    return done


def finish_interrupted(layout: DatasetLayout) -> int:
    """What a command that opens the sweep does first: finish a compaction that was killed (its staged files
    put in place, so readers see no gap), unless another process holds the sweep (a compaction running now)."""
    if not any(staged_files(d) for d in layout.table_dirs().values()):
        return 0
    try:
        with sweep_lock(layout, "finishing an interrupted compaction of"):
            return finish(layout)
    except UserError:  # busy: the process that holds it finishes its own
        return 0


def _replaced(staged: Path) -> list[str]:
    return json.loads((pq.read_metadata(staged).metadata or {}).get(REPLACES, b"[]"))


def _put_in_place(staged: Path, points: list[str], compacted: list[str]) -> None:
    """Delete what ``staged`` replaces (its points' own files, the compacted files it names), then rename it."""
    final = final_path(staged)
    suffix = final.name.split(".", 1)[1]  # <table>.parquet
    doomed = [f"{pid}.{suffix}" for pid in points] + compacted
    with ThreadPoolExecutor(THREADS) as pool:  # an unlink waits for the disk if the file is being written back
        list(pool.map(_unlink, [(str(final.parent), doomed[i::THREADS]) for i in range(THREADS)]))
    os.replace(staged, final)


def _unlink(where: tuple[str, list[str]]) -> None:
    folder, names = where
    for name in names:
        try:
            os.unlink(os.path.join(folder, name))
        except FileNotFoundError:
            pass


# ----------------------------------------------------------------------------- compacting
def compact_layout(layout: DatasetLayout, rows: int = ROWS) -> Compaction:
    """Compact every table of the sweep at ``layout``; the caller holds the sweep's lock (``compact`` takes it)."""
    if rows < 1:
        raise UserError(f"rows per compacted file must be at least 1, got {rows}")
    start = time.perf_counter()
    out = Compaction(layout.name, finished=finish(layout))
    dirs = layout.table_dirs()
    if layout.result in dirs:
        # the result table first: the points whose result rows it holds are the ones whose other tables are whole
        result = TableCompaction(layout.result)
        stored = _compact_table(dirs[layout.result], None, rows, result)
        for table in [t for t in dirs if t != layout.result]:
            done = TableCompaction(table)
            _compact_table(dirs[table], stored, rows, done)
            out.tables.append(done)
        out.tables.insert(0, result)
        out.tables = [t for t in out.tables if t.written]
    out.seconds = time.perf_counter() - start
    return out


def _compact_table(table_dir: Path, stored: set[str] | None, rows: int, stats: TableCompaction) -> set[str]:
    """Compact one table, per partition directory: the point files of ``stored`` points (None: every point
    file that reads, the result table) and the compacted files below ``rows`` rows. Returns the points it
    holds (their rows read, or in its compacted files)."""
    held: set[str] = set()
    leaves: dict[Path, tuple[list[Path], list[Path]]] = defaultdict(lambda: ([], []))
    for f in dataset_files(table_dir):
        if is_compacted(f):
            if stored is None:
                held.update(pid for pid, _ in point_ids(f))
            if pq.read_metadata(f).num_rows < rows:
                leaves[f.parent][0].append(f)
        elif stored is None or point_of(f) in stored:
            leaves[f.parent][1].append(f)
    for _, (small, point_files) in sorted(leaves.items()):
        if point_files or len(small) > 1:
            held.update(_compact_leaf(stats.table, small, point_files, rows, stats))
    return held


def _compact_leaf(table: str, small: list[Path], point_files: list[Path], rows: int, stats: TableCompaction
                  ) -> set[str]:
    """Rewrite one partition directory's point files (and compacted files below ``rows`` rows) into files of
    up to ``rows`` rows; each file written replaces whole input files, so each step stands alone. A file that
    cannot be read (cut short by something other than rdasim) stays as it is. Returns the points read."""
    files: list[Path] = []
    tables: list[pa.Table] = []
    held = 0  # rows in tables
    points: set[str] = set()
    todo = small + point_files
    with ThreadPoolExecutor(THREADS) as pool:
        for start in range(0, len(todo), WINDOW):
            window = todo[start:start + WINDOW]
            for f, t in zip(window, pool.map(_try_read, window)):  # without the GIL: the reads' latencies overlap
                if t is None:
                    continue
                if files and held + t.num_rows > rows:
                    _step(table, files, tables, stats)
                    files, tables, held = [], [], 0
                files.append(f)
                tables.append(t)
                held += t.num_rows
                if not is_compacted(f):
                    points.add(point_of(f))
            tables = [_concat(tables)] if tables else []  # one table, not thousands of one-row ones
    if files and not (len(files) == 1 and is_compacted(files[0])):  # one compacted file alone: as it is
        _step(table, files, tables, stats)
    return points


def _try_read(f: Path) -> pa.Table | None:
    try:
        return read_file(f)
    except UserError:  # cannot be read: left as it is (its point is pending; a rerun rewrites it)
        return None


def _concat(tables: list[pa.Table]) -> pa.Table:
    """The rows of ``tables`` in one table, columns matched by name (an error row lacks the job's columns)."""
    return pa.concat_tables(tables, promote_options="default").combine_chunks() if len(tables) > 1 else tables[0]


def _step(table: str, files: list[Path], tables: list[pa.Table], stats: TableCompaction) -> None:
    """One compacted file from ``files`` (read as ``tables``): staged, then what it replaces deleted, then put
    in place."""
    merged = _concat(tables)
    if {"point_index", "point_id"} <= set(merged.column_names):
        merged = merged.take(pc.sort_indices(merged, [("point_index", "ascending"), ("point_id", "ascending")]))
    final = files[0].parent / f"{COMPACTED}{uuid.uuid4().hex[:16]}.{table}.parquet"
    staged = staged_path(final)
    compacted = [f.name for f in files if is_compacted(f)]
    _write(merged, staged, compacted)
    stats.bytes_before += sum(f.stat().st_size for f in files)
    _put_in_place(staged, [point_of(f) for f in files if not is_compacted(f)], compacted)
    stats.point_files += len(files) - len(compacted)
    stats.merged += len(compacted)
    stats.written += 1
    stats.rows += merged.num_rows
    stats.bytes_after += final.stat().st_size


def _write(table: pa.Table, path: Path, replaces: list[str]) -> None:
    """A compacted file, atomically, complete and on disk (fsync) before anything it replaces is deleted."""
    meta = {k: v for k, v in (table.schema.metadata or {}).items() if k not in POINT_KEYS}
    meta[REPLACES] = json.dumps(replaces).encode()
    stats = tuple(f.name for f in table.schema if f.name not in UNBOUNDED_TEXT)
    write_table(table, path, meta, TableForm(statistics=stats, row_group=ROWS, durable=True))


# ----------------------------------------------------------------------------- a point run again
def release(layout: DatasetLayout, points: set[str]) -> int:
    """Take ``points`` out of the compacted files that hold them, before they are run again (each file
    rewritten without their rows and replaced atomically). The result table last: a kill half-way leaves
    the points stored with their result rows (they are error rows, which have no others) or pending
    with none, never rows twice once they are rerun. Returns the files rewritten."""
    if not points:
        return 0
    dirs = layout.table_dirs()
    leaving = pa.array(sorted(points), pa.string())
    rewritten = 0
    for table in [t for t in dirs if t != layout.result] + [t for t in dirs if t == layout.result]:
        for f in [f for f in dataset_files(dirs[table]) if is_compacted(f)]:
            t = read_file(f)
            keep = pc.invert(pc.is_in(t.column("point_id"), leaving))
            if pc.all(keep).as_py():
                continue
            if pc.any(keep).as_py():
                _write(t.filter(keep), f, [])  # replaced atomically: the file with them, or without
            else:
                f.unlink()
            rewritten += 1
    return rewritten


# ----------------------------------------------------------------------------- the command
def compact(path: str | Path, rows: int = ROWS) -> list[Compaction]:
    """Compact every sweep at ``path`` (an --out directory or one sweep's), each under its lock."""
    found = find_manifests(Path(path))
    if not found:
        raise UserError(f"no sweep at {str(path)!r}: expected an --out directory holding _<name>.manifest.json "
                        "or a sweep's dataset directory")
    out = []
    for manifest in found:
        layout = of_manifest(manifest)
        if layout.legacy:
            raise UserError(f"sweep {layout.name!r} in {str(layout.root)!r} was written by an older rdasim, in an "
                            "older layout: it is read but not compacted (rerun it with --replace to rewrite it)")
        with sweep_lock(layout, "compacting"):
            out.append(compact_layout(layout, rows))
    return out


def point_file_count(layout: DatasetLayout) -> int:
    """Point files (not compacted) in the sweep's largest table: what compact = "auto" looks at."""
    return max((sum(1 for f in dataset_files(d) if not is_compacted(f))
                for d in layout.table_dirs().values()), default=0)
