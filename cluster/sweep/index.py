"""Which points a sweep's files hold, read from the files themselves (the truth; the manifest may lag).

A point is stored when its result rows are: in its own point file (its footer names the
point and its status) or in a compacted file (its ``point_id`` and ``point_status``
columns). A compaction that was interrupted after its file was complete (a staged file,
hidden from readers until it is in place) holds its points too: the next compaction or
run finishes putting it in place (compact.py).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cluster.errors import UserError
from cluster.results.layout import unreadable
from cluster.sweep.layout import STAGED, dataset_files, is_compacted, point_of
from cluster.sweep.records import read_status


@dataclass
class Holdings:
    """The points one table holds: their status, and which are in compacted (or staged) files."""

    status: dict[str, str] = field(default_factory=dict)  # point id -> ok / error
    compacted: set[str] = field(default_factory=set)
    unreadable: list[Path] = field(default_factory=list)  # point files that cannot be read: their points are pending


THREADS = 4  # files read at once: pyarrow reads without the GIL, so their latencies overlap


def read_file(path: Path, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file's rows (pyarrow.parquet.read_table's dataset machinery costs several times more per file);
    a file that cannot be read is a UserError naming it."""
    try:
        with pq.ParquetFile(path) as f:
            return f.read(columns=columns)
    except (OSError, pa.ArrowInvalid) as exc:
        raise unreadable(path, exc) from None


def point_ids(file: Path) -> list[tuple[str, str]]:
    """The (point id, status) pairs of a compacted (or staged) file, each once, in file order."""
    t = read_file(file, ["point_id", "point_status"])
    seen: dict[str, str] = {}
    for pid, status in zip(t.column(0).to_pylist(), t.column(1).to_pylist()):
        seen.setdefault(pid, status)
    return list(seen.items())


def staged_files(table_dir: Path) -> list[Path]:
    """Compacted files written in full whose compaction has not yet put them in place."""
    return sorted(table_dir.rglob(f".*{STAGED}")) if table_dir.is_dir() else []


def holdings(table_dir: Path) -> Holdings:
    """Every point the table in ``table_dir`` holds. A point file that cannot be read (cut short
    by something other than rdasim's atomic writes) or names another point holds nothing."""
    out = Holdings()
    files = dataset_files(table_dir)
    for f in [f for f in files if is_compacted(f)] + staged_files(table_dir):
        for pid, status in point_ids(f):
            out.status[pid] = status
            out.compacted.add(pid)
    points = [f for f in files if not is_compacted(f)]
    with ThreadPoolExecutor(THREADS) as pool:
        for f, found in zip(points, pool.map(read_status, points)):
            if found is None:
                out.unreadable.append(f)
            elif found[0] == point_of(f):
                out.status[found[0]] = found[1]
    return out


def stored_specs(table_dir: Path) -> set[str]:
    """The spec versions (hashes) the table's readable files were computed from: a point file's footer, a
    compacted file's ``sweep_spec`` column. What a rerun checks when the manifest that lists them is lost."""
    out: set[str] = set()
    for f in dataset_files(table_dir):
        try:
            if is_compacted(f):
                out.update(v for v in read_file(f, ["sweep_spec"]).column(0).unique().to_pylist() if v)
            else:
                with pq.ParquetFile(f) as pf:
                    found = (pf.metadata.metadata or {}).get(b"rdasim.spec_hash")
                if found:
                    out.add(found.decode())
        except (OSError, pa.ArrowInvalid, UserError):  # unreadable: pending, recomputed (holdings)
            continue
    return out
