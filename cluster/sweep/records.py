"""The rows a sweep stores for a point, and their store: its job's tables, prefixed with sweep and axis
columns, each written by the one writer (cluster/results/writer.py) at the point's fixed path.

Every stored table starts with the sweep columns (schemas.SWEEP_COLUMNS) and one typed
column per swept config path, followed by the job's own columns. A point that failed
becomes one error row with the same columns (the job's ones null), so the dataset reads
as one table. Each point file's footer names its point, its status, the spec version's hash
and the rdasim version, and nothing that grows with the sweep: the spec lives once, in the
manifest, so a file's metadata is the same size at 10 points and at 10^5.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from cluster.config import config_hash
from cluster.config.schema import get_path
from cluster.results import schemas
from cluster.results.writer import TableForm, write_table
from cluster.sweep.layout import DatasetLayout
from cluster.version import code_version

if TYPE_CHECKING:
    from cluster.sweep.plan import SweepPlan
    from cluster.sweep.points import Point

STATUS_OK, STATUS_ERROR = "ok", "error"
SWEEP_FIELDS = [pa.field(c.name, c.type) for c in schemas.SWEEP_COLUMNS]


@dataclass(frozen=True)
class PointRun:
    """How one point's run went (whatever its outcome)."""

    status: str
    attempts: int
    node: str | None = None
    seconds: float | None = None
    error: str | None = None
    traceback: str | None = None


def prefix_values(sweep_id: str, spec_hash: str, point, run: PointRun) -> list:
    return [sweep_id, spec_hash, point.id, point.index, run.status, run.error, run.traceback, run.attempts, run.node,
            run.seconds]


def file_metadata(point, status: str, spec_hash: str = "") -> dict[bytes, bytes]:
    """A point file's footer: which point, how it went, which spec version and code (a few dozen bytes)."""
    return {
        b"rdasim.version": code_version().label.encode(),
        b"rdasim.spec_hash": spec_hash.encode(),
        b"rdasim.point_id": point.id.encode(),
        b"rdasim.point_status": status.encode(),
    }


def point_form(fields: list[pa.Field]) -> TableForm:
    """How a point's file is written (cluster/results/writer.py), its footer costing about 80 bytes a column.

    No serialised Arrow schema (every column type here is one Parquet stores as itself: int32,
    int64, double, bool, string), no dictionary pages (a file holds one point's rows), and
    statistics only where a query filters: the sweep, its spec version, the point's status and
    the store's other columns in ``fields`` (the swept paths; an exploration's trial columns).
    Compacted files keep statistics of every column but the error text.
    """
    names = tuple(f.name for f in fields if f.name in FILTERED or f.name not in SWEEP_NAMES)
    return TableForm(statistics=names, store_schema=False, dictionary=False)


SWEEP_NAMES = {f.name for f in SWEEP_FIELDS}
FILTERED = ("sweep_id", "sweep_spec", "point_status")  # the sweep columns a point file keeps statistics of
UNBOUNDED_TEXT = ("point_error", "point_traceback")  # columns whose statistics would copy kilobytes of text


def decorate(table: pa.Table, prefix: list, fields: list[pa.Field]) -> pa.Table:
    """``table`` with constant columns ``fields`` (values ``prefix``) in front."""
    n = table.num_rows if table.num_columns else 1  # a column-less error row is still a row
    taken = set(table.column_names)
    clash = [f.name for f in fields if f.name in taken]
    if clash:
        raise ValueError(f"sweep columns {clash} collide with the job's own columns; rename the swept keys")
    arrays = [pa.array([v] * n, type=f.type) for v, f in zip(prefix, fields)] + list(table.columns)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields + list(table.schema), metadata=table.schema.metadata))


def error_table(result_schema: pa.Schema | None, point) -> pa.Table:
    """One row of nulls in the result's columns (identity columns filled where known)."""
    if result_schema is None:
        return pa.table({})
    known = {"config_hash": config_hash(point.config), "seed": (point.config.get("run") or {}).get("seed"),
             **schemas.code_identity(), "status": "failed"}
    arrays = [pa.array([known.get(f.name)], type=f.type) for f in result_schema]
    return pa.Table.from_arrays(arrays, schema=result_schema)


def read_status(path: Path) -> tuple[str, str] | None:
    """(point id, status) from a stored file's footer, or None if it is missing or unreadable."""
    try:
        with pq.ParquetFile(path) as f:  # not read_schema: a dataset's machinery, several times the cost per file
            meta = f.metadata.metadata or {}
    except (OSError, pa.ArrowInvalid):
        return None
    pid, status = meta.get(b"rdasim.point_id"), meta.get(b"rdasim.point_status")
    if pid is None or status is None:
        return None
    return pid.decode(), status.decode()


def pick_result(tables: dict[str, pa.Table], preferred: str) -> str:
    """Name of the result table: the preferred one, else a ``*summary`` table, else the first."""
    if preferred in tables:
        return preferred
    summaries = [n for n in tables if n.endswith("summary")]
    if summaries:
        return summaries[0]
    if not tables:
        raise RuntimeError("the job returned no Arrow tables")
    return next(iter(tables))


@dataclass
class Store:
    """The point files of one sweep: where each of a point's tables lands, and storing them.

    Other tables are written before the point's result file, so a valid result file means
    the point is complete. A point whose job failed, or whose tables cannot be stored,
    becomes one error row in the result dataset, with the result's columns: the command's
    when it knows them up front, else those of the first result stored (``learned``)."""

    plan: SweepPlan
    layout: DatasetLayout
    learned: pa.Schema | None = None

    def result_schema(self) -> pa.Schema | None:
        return self.plan.command.result_schema() or self.learned

    def path(self, point: Point, table: str | None = None) -> Path:
        values = {p: get_path(point.config, p) for p in self.layout.partition_by}
        return self.layout.point_file(point.id, values, table)

    def columns(self, point: Point, run: PointRun) -> tuple[list[pa.Field], list]:
        """The constant columns in front of a point's rows (the sweep's, then the swept paths'), and their values."""
        plan = self.plan
        return (SWEEP_FIELDS + plan.axes.fields,
                prefix_values(plan.spec.name, plan.spec_hash, point, run) + plan.axes.values(point.config))

    def write(self, point: Point, tables: dict[str, pa.Table] | None, run: PointRun) -> PointRun:
        """Store a finished point; returns its run (turned into an error if storing failed)."""
        fields, values = self.columns(point, run)
        footer = file_metadata(point, run.status, self.plan.spec_hash)
        if run.status == STATUS_OK:
            try:
                if tables is None:
                    raise ValueError("the point reported ok but returned no tables")
                name = pick_result(tables, self.plan.command.result)
                rows = {t: decorate(tab, values, fields) for t, tab in tables.items() if t != name}
                rows[name] = decorate(tables[name], values, fields)  # last: its file says the point is whole
            except (ValueError, RuntimeError, pa.ArrowException) as exc:
                run = PointRun(STATUS_ERROR, run.attempts, run.node, run.seconds,
                               f"cannot store the point's tables: {exc}", None)
                fields, values = self.columns(point, run)
                footer = file_metadata(point, run.status, self.plan.spec_hash)
            else:
                if self.learned is None:
                    self.learned = tables[name].schema
                for table, decorated in rows.items():
                    write_table(decorated, self.path(point, None if table == name else table),
                                {**(decorated.schema.metadata or {}), **footer}, point_form(fields))
                return run
        error = decorate(error_table(self.result_schema(), point), values, fields)
        write_table(error, self.path(point), {**(error.schema.metadata or {}), **footer}, point_form(fields))
        return run
